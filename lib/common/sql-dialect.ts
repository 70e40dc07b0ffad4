import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';

/** The SQL dialects of the fences and the transaction locks: PostgreSQL, and MySQL or MariaDB. */
export type SqlDialect = 'postgres' | 'mysql';

/**
 * The dialect an ORM adapter (`nest-distributed-lock/orm`) made a client for, as a property of the
 * client. `Symbol.for`, so that two copies of the package agree on it.
 */
export const SQL_DIALECT: unique symbol = Symbol.for('nest-distributed-lock.sql-dialect');

const NAMES: Record<SqlDialect, string> = { postgres: 'PostgreSQL', mysql: 'MySQL/MariaDB' };

/**
 * Refuse a client an ORM adapter made for the other dialect, before any statement is sent: it
 * would fail later as a syntax error (`$1` in MySQL, `?` in PostgreSQL) or, worse, half-work.
 * A client without the mark (a `pg` or `mysql2` client) is not judged here.
 */
export function refuseOtherDialect(db: unknown, speaks: SqlDialect, field: string, where: string): void {
  const made = typeof db === 'object' && db !== null ? (db as { [SQL_DIALECT]?: unknown })[SQL_DIALECT] : undefined;
  if (made === undefined || made === speaks) return;
  const madeFor = typeof made === 'string' && made in NAMES ? NAMES[made as SqlDialect] : String(made);
  throw new InvalidLockOptionsError(field, `was made by an ORM adapter for ${madeFor}, and this speaks ${NAMES[speaks]}: adapt the handle with '${speaks}'`, where);
}
