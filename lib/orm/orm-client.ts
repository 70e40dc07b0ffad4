import type { PgTransactionClient } from '../backends/postgres/pg-transaction-lock.js';
import { SQL_DIALECT, type SqlDialect } from '../common/sql-dialect.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { MySqlQueryable } from '../fencing/mysql-fence.js';
import type { PgQueryable } from '../fencing/pg-fence.js';

/**
 * What an adapter can tell of its handle: `'T'` in a transaction, `'I'` not in one (each
 * statement may run on another pooled connection), `null` when the ORM does not say.
 */
export type OrmTransactionStatus = 'T' | 'I' | null;

/**
 * An ORM's handle as a PostgreSQL client: what `PgTransactionLock.acquire` and `PgFence` take.
 * `query(text, values)` sends `text` with its `$1`…`$n` parameters through the ORM's raw-SQL call
 * (in the ORM's transaction when the handle is one), and resolves to the rows and the count of rows
 * the statement touched. The ORM's own errors pass through unchanged.
 */
export interface PgOrmClient extends PgTransactionClient, PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>>; rowCount: number | null }>;
  /** `'T'` / `'I'` when the ORM tells (`PgTransactionLock` refuses `'I'`), else `null`. */
  getTransactionStatus(): OrmTransactionStatus;
  /** The driver's error (its `code`: the SQLSTATE) inside an error the ORM threw; the error itself when the ORM does not wrap. */
  driverErrorOf(error: unknown): unknown;
  readonly [SQL_DIALECT]: 'postgres';
}

/**
 * An ORM's handle as a MySQL or MariaDB client: what `MySqlFence` (and any `MySqlQueryable`
 * consumer) takes. `query(sql, values)` sends `sql` with its `?` parameters through the ORM and
 * resolves to mysql2's shape, `[rows or header, fields]`: rows for a `SELECT`, a header with
 * `affectedRows` (and the server's `info`, "Rows matched: N  Changed: M", when the ORM passes it on)
 * for a write. The ORM's own errors pass through unchanged.
 */
export interface MySqlOrmClient extends MySqlQueryable {
  /** `'T'` / `'I'` when the ORM tells, else `null`. */
  getTransactionStatus(): OrmTransactionStatus;
  /** The driver's error (`errno`, `code`, `sqlState`) inside an error the ORM threw; the error itself when the ORM does not wrap. */
  driverErrorOf(error: unknown): unknown;
  readonly [SQL_DIALECT]: 'mysql';
}

/** The client of each dialect. */
export interface OrmClientOf {
  postgres: PgOrmClient;
  mysql: MySqlOrmClient;
}

/** One statement's answer, in the adapter's terms: rows, or a write's header. */
export interface OrmAnswer {
  /** The rows a statement returned (a `SELECT`, a PostgreSQL `RETURNING`); `undefined` for a write without them. */
  rows?: Array<Record<string, unknown>>;
  /** The rows a write matched (PostgreSQL: touched), when the ORM tells. */
  affectedRows?: number;
  /** MySQL's header of a write as the driver gave it (`affectedRows`, `info`), when the ORM passes it on. */
  header?: unknown;
}

/** The ORM's side of an adapter: run one statement in the dialect's own placeholders. */
export interface OrmRunner {
  run(text: string, values: unknown[]): Promise<OrmAnswer>;
  status(): OrmTransactionStatus;
  /** The driver's error inside the ORM's (where the ORM wraps it); the error itself by default. */
  driverError?(error: unknown): unknown;
}

/** Refuse a dialect that is neither, naming the adapter. */
export function checkDialect(dialect: unknown, where: string): SqlDialect {
  if (dialect === 'postgres' || dialect === 'mysql') return dialect;
  throw new InvalidLockOptionsError('dialect', `must be 'postgres' or 'mysql' (MySQL and MariaDB), got ${JSON.stringify(dialect) ?? String(dialect)}`, where);
}

/** Refuse a handle without the method the adapter calls (before any statement). */
export function checkHandle(handle: unknown, method: string, what: string, where: string): void {
  if (typeof (handle as Record<string, unknown> | null)?.[method] !== 'function') {
    throw new InvalidLockOptionsError('handle', `must be ${what} (with ${method}())`, where);
  }
}

/** The client of `dialect` over the ORM's runner. */
export function ormClient<D extends SqlDialect>(dialect: D, runner: OrmRunner): OrmClientOf[D] {
  const status = (): OrmTransactionStatus => runner.status();
  const driverErrorOf = (error: unknown): unknown => runner.driverError?.(error) ?? error;
  if (dialect === 'postgres') {
    const client: PgOrmClient = {
      [SQL_DIALECT]: 'postgres',
      getTransactionStatus: status,
      driverErrorOf,
      async query(text, values = []) {
        const answer = await runner.run(text, values);
        const rows = answer.rows ?? [];
        return { rows, rowCount: answer.affectedRows ?? rows.length };
      },
    };
    return client as OrmClientOf[D];
  }
  const client: MySqlOrmClient = {
    [SQL_DIALECT]: 'mysql',
    getTransactionStatus: status,
    driverErrorOf,
    async query(sql, values = []) {
      const answer = await runner.run(sql, values);
      return [answer.rows ?? answer.header ?? { affectedRows: answer.affectedRows ?? 0 }, undefined];
    },
  };
  return client as OrmClientOf[D];
}
