import type { SqlDialect } from '../common/sql-dialect.js';
import { checkDialect, checkHandle, ormClient, type OrmAnswer, type OrmClientOf } from './orm-client.js';

/** Kysely's `CompiledQuery`, as `CompiledQuery.raw(sql, parameters)` makes it. */
export interface KyselyCompiledQueryLike {
  readonly sql: string;
  readonly parameters: readonly unknown[];
  readonly query: { readonly kind: 'RawNode'; readonly sqlFragments: readonly string[]; readonly parameters: readonly never[] };
  readonly queryId: { readonly queryId: string };
}

/** A Kysely `Transaction` (or `Kysely`, `ControlledTransaction`), structurally. */
export interface KyselyLike {
  executeQuery(query: KyselyCompiledQueryLike): Promise<{ rows: unknown[]; numAffectedRows?: bigint }>;
  /** `true` on a `Transaction`. */
  readonly isTransaction: boolean;
  /** A `ControlledTransaction` once committed or rolled back. */
  readonly isCommitted?: boolean;
  readonly isRolledBack?: boolean;
  /** The same connection without the instance's plugins (a `CamelCasePlugin` would rename the columns the consumers read). */
  withoutPlugins?(): KyselyLike;
}

let queries = 0;

/**
 * A Kysely transaction as the client of `PgTransactionLock`, `PgFence` (`'postgres'`) or
 * `MySqlFence` (`'mysql'`) — the dialect of your Kysely's `dialect` (Kysely's handle does not say).
 *
 * - Statements run as `CompiledQuery.raw(sql, values)` through `executeQuery` on the handle
 *   without its plugins (a `CamelCasePlugin` would rename the columns read back), in the dialect's
 *   own placeholders, on the transaction's connection.
 * - Transaction status: `'T'` on a `Transaction` (`db.transaction().execute(trx => …)`) or a
 *   `ControlledTransaction` not yet committed or rolled back; `'I'` on the `Kysely` instance.
 * - MySQL: Kysely reports a write's `numAffectedRows`, not the server's "Rows matched" text. With
 *   mysql2's default flags (`FOUND_ROWS`), that is the matched count `MySqlFence` needs.
 * - Kysely's (the driver's) errors pass through unchanged.
 *
 * @example
 * await db.transaction().execute(async (trx) => {
 *   const sql = fromKysely(trx, 'postgres');
 *   const token = await txLock.acquire(sql, `wallet:${id}`);
 *   await wallets.update(sql, id, { balance }, token);
 * });
 */
export function fromKysely<D extends SqlDialect>(trx: KyselyLike, dialect: D): OrmClientOf[D] {
  const where = 'fromKysely()';
  checkDialect(dialect, where);
  checkHandle(trx, 'executeQuery', 'a Kysely instance or transaction', where);
  const db = trx.withoutPlugins?.() ?? trx;
  return ormClient(dialect, {
    status: () => (trx.isTransaction && !trx.isCommitted && !trx.isRolledBack ? 'T' : 'I'),
    async run(text, values): Promise<OrmAnswer> {
      const result = await db.executeQuery({
        sql: text,
        parameters: values,
        query: { kind: 'RawNode', sqlFragments: [text], parameters: [] },
        queryId: { queryId: `nest-distributed-lock-${++queries}` },
      });
      const affectedRows = result.numAffectedRows === undefined ? undefined : Number(result.numAffectedRows);
      const rows = result.rows as Array<Record<string, unknown>>;
      if (dialect === 'postgres') return { rows, affectedRows };
      return affectedRows === undefined ? { rows } : { affectedRows };
    },
  });
}
