import type { SqlDialect } from '../common/sql-dialect.js';
import { checkDialect, checkHandle, ormClient, type OrmAnswer, type OrmClientOf } from './orm-client.js';
import { splitStatement, valuesInOrder } from './sql-statement.js';

/** Knex (a transaction or the instance): what MikroORM 6's SQL drivers run on. */
export interface KnexLike {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
}

/** A MikroORM 6 SQL `EntityManager` (`@mikro-orm/postgresql`, `@mikro-orm/mysql`, `@mikro-orm/mariadb`), structurally. */
export interface MikroOrmEntityManagerLike {
  /** The transaction's Knex transaction (inside `em.transactional()` or after `em.begin()`), else `undefined`. */
  getTransactionContext(): unknown;
  getKnex(): KnexLike;
  isInTransaction(): boolean;
}

/**
 * A MikroORM 6 entity manager as the client of `PgTransactionLock`, `PgFence` (`'postgres'`) or
 * `MySqlFence` (`'mysql'`) — the dialect of your driver package.
 *
 * - Statements run on the entity manager's transaction (the fork `em.transactional(async (em) =>
 *   …)` hands you, or after `em.begin()`): `raw(sql, values)` of its Knex transaction, with the
 *   values as bound parameters (a PostgreSQL statement's `$1`…`$n` become Knex's `?`), as `pg` and
 *   `mysql2` bind them for the fences. Not through `em.execute()`: it writes the values into the
 *   text as literals, and an array value becomes a list (`SELECT ?` with `[[1, 2]]` runs
 *   `SELECT 1, 2`), where a bound parameter is one value (a PostgreSQL array).
 *   Outside a transaction, on `em.getKnex()`: each statement may take another pooled connection.
 * - Transaction status: `em.isInTransaction()` — `'T'` or `'I'`.
 * - MySQL: the header is mysql2's, `info` ("Rows matched") included.
 * - Errors are the driver's (`pg`, `mysql2`; Knex puts the statement before the message), not
 *   MikroORM's `DriverException`s, which only `em.execute()` makes; passed through unchanged.
 * - MikroORM 7 runs on Kysely, not Knex: untested here (it needs Node.js 22).
 *
 * @example
 * await em.transactional(async (em) => {
 *   const db = fromMikroOrm(em, 'postgres');
 *   const token = await txLock.acquire(db, `wallet:${id}`);
 *   await wallets.update(db, id, { balance }, token);
 * });
 */
export function fromMikroOrm<D extends SqlDialect>(em: MikroOrmEntityManagerLike, dialect: D): OrmClientOf[D] {
  const where = 'fromMikroOrm()';
  checkDialect(dialect, where);
  checkHandle(em, 'getKnex', 'a MikroORM 6 SQL EntityManager', where);
  return ormClient(dialect, {
    status: () => (em.isInTransaction() ? 'T' : 'I'),
    async run(text, values): Promise<OrmAnswer> {
      const context = em.getTransactionContext() as KnexLike | undefined;
      const knex = typeof context?.raw === 'function' ? context : em.getKnex();
      if (dialect === 'mysql') {
        // Knex and mysql2 bind MySQL's `?` as they are (mysql2 itself does not skip quotes).
        const [first] = (await knex.raw(text, values)) as [unknown];
        return Array.isArray(first) ? { rows: first as Array<Record<string, unknown>> } : { header: first };
      }
      // Knex's placeholder is `?`: a `?` of the statement itself is kept by escaping it (`\?`).
      const split = splitStatement(text, 'postgres');
      const result = (await knex.raw(split.strings.map((s) => s.replaceAll('?', '\\?')).join('?'), valuesInOrder(split, values, where))) as {
        rows: Array<Record<string, unknown>>;
        rowCount: number | null;
      };
      return { rows: result.rows, affectedRows: result.rowCount ?? undefined };
    },
  });
}
