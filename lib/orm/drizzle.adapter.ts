import type { SqlDialect } from '../common/sql-dialect.js';
import { DistributedLockError } from '../errors/distributed-lock.error.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { checkDialect, checkHandle, ormClient, type OrmAnswer, type OrmClientOf } from './orm-client.js';
import { splitStatement, valuesInOrder } from './sql-statement.js';

/** A Drizzle database or transaction (`drizzle-orm/node-postgres`, `drizzle-orm/mysql2`), structurally. */
export interface DrizzleLike {
  execute(query: any): PromiseLike<unknown>;
}

/** The part of drizzle-orm's `sql` the adapter builds statements with. */
interface DrizzleSql {
  raw(text: string): unknown;
  param(value: unknown): unknown;
  join(chunks: unknown[]): unknown;
}

/** Drizzle marks its classes with this (`entityKind`), each with the kind of its bases. */
const ENTITY_KIND = Symbol.for('drizzle:entityKind');

/** The entity kinds of `handle`'s class and its bases: `NodePgTransaction`, `PgTransaction`, `PgDatabase`, … */
function kindsOf(handle: object): string[] {
  const kinds: string[] = [];
  for (let c = (handle as { constructor?: unknown }).constructor; typeof c === 'function'; c = Object.getPrototypeOf(c)) {
    const kind = (c as unknown as Record<symbol, unknown>)[ENTITY_KIND];
    if (typeof kind === 'string' && !kinds.includes(kind)) kinds.push(kind);
  }
  return kinds;
}

let drizzleSql: Promise<DrizzleSql> | undefined;

/**
 * drizzle-orm's own `sql`, loaded on the first statement: Drizzle's `execute()` takes only its SQL
 * objects, built by `sql`. The app that passes a Drizzle handle has drizzle-orm installed (an
 * optional peer of this package); loading it lazily keeps this entry free of it for everyone else.
 */
function loadSql(): Promise<DrizzleSql> {
  drizzleSql ??= import('drizzle-orm').then((module) => module.sql as unknown as DrizzleSql);
  return drizzleSql;
}

/**
 * A Drizzle transaction as the client of `PgTransactionLock`, `PgFence` (`'postgres'`) or
 * `MySqlFence` (`'mysql'`). The dialect is checked against the handle (a `PgDatabase` or a
 * `MySqlDatabase` and their transactions): a mismatch is refused before any statement.
 *
 * - Statements go through `tx.execute()`: the text is cut at its placeholders (`$1`…`$n`, or `?`,
 *   outside quotes) and rebuilt with drizzle-orm's `sql.raw()` and `sql.param()`, so every value is
 *   one bound parameter (an array or an object too), numbered by Drizzle.
 * - Transaction status: `'T'` on a transaction (`db.transaction(async (tx) => …)`), `'I'` on the
 *   database itself. Drizzle does not say that a transaction has ended.
 * - Drivers: node-postgres (a `pg` result) and mysql2 (`[rows or header, fields]`, `info`
 *   included); another driver's answer of another shape is refused with a `DistributedLockError`.
 * - Drizzle's errors (`DrizzleQueryError`, the driver's error as its `cause`, which
 *   `driverErrorOf(error)` returns) pass through unchanged.
 *
 * @example
 * await db.transaction(async (tx) => {
 *   const sql = fromDrizzle(tx, 'postgres');
 *   const token = await txLock.acquire(sql, `wallet:${id}`);
 *   await wallets.update(sql, id, { balance }, token);
 * });
 */
export function fromDrizzle<D extends SqlDialect>(tx: DrizzleLike, dialect: D): OrmClientOf[D] {
  const where = 'fromDrizzle()';
  checkDialect(dialect, where);
  checkHandle(tx, 'execute', 'a Drizzle database or transaction', where);
  const kinds = kindsOf(tx);
  const own = kinds.includes('PgDatabase') ? 'postgres' : kinds.includes('MySqlDatabase') ? 'mysql' : undefined;
  if (own !== undefined && own !== dialect) throw new InvalidLockOptionsError('dialect', `is '${dialect}', and the handle is a Drizzle ${kinds[0]}: use '${own}'`, where);
  const inTransaction = kinds.includes('PgTransaction') || kinds.includes('MySqlTransaction');
  return ormClient(dialect, {
    status: () => (own === undefined ? null : inTransaction ? 'T' : 'I'),
    driverError: (error) => (isDrizzleQueryError(error) ? error.cause : undefined),
    async run(text, values): Promise<OrmAnswer> {
      const sql = await loadSql();
      const split = splitStatement(text, dialect);
      const params = valuesInOrder(split, values, where);
      const chunks: unknown[] = [sql.raw(split.strings[0])];
      params.forEach((value, i) => chunks.push(sql.param(value), sql.raw(split.strings[i + 1])));
      const result = await tx.execute(sql.join(chunks));
      return dialect === 'postgres' ? pgAnswer(result, where) : mySqlAnswer(result, where);
    },
  });
}

/** Drizzle's `DrizzleQueryError` (its name is `Error`): the failed statement, its parameters, the driver's error as `cause`. */
function isDrizzleQueryError(error: unknown): error is Error & { cause: unknown } {
  return error instanceof Error && typeof (error as { query?: unknown }).query === 'string' && Array.isArray((error as { params?: unknown }).params);
}

/** node-postgres's result. */
function pgAnswer(result: unknown, where: string): OrmAnswer {
  const { rows, rowCount } = (result ?? {}) as { rows?: unknown; rowCount?: number | null };
  if (!Array.isArray(rows)) throw new DistributedLockError(`${where}: the driver answered without rows (only node-postgres's answer is read)`);
  return { rows: rows as Array<Record<string, unknown>>, affectedRows: rowCount ?? undefined };
}

/** mysql2's `[rows or header, fields]`. */
function mySqlAnswer(result: unknown, where: string): OrmAnswer {
  if (!Array.isArray(result)) throw new DistributedLockError(`${where}: the driver answered with no [rows, fields] (only mysql2's answer is read)`);
  const [first] = result as [unknown];
  return Array.isArray(first) ? { rows: first as Array<Record<string, unknown>> } : { header: first };
}
