/**
 * The parts of `mysql2/promise` the MySQL backend uses, structurally: a user of another backend
 * never loads `mysql2`, and a promise pool the application owns fits as it is.
 */

/** What a write answers: `insertId` (an AUTO_INCREMENT's value), `affectedRows`, the server's `info` ("Rows matched: 1  Changed: 1  Warnings: 0"). */
export interface MySqlResultHeader {
  insertId?: number | string;
  affectedRows?: number;
  info?: string;
}

/** `[rows, fields]` of a SELECT, `[header, undefined]` of a write, `[[rows, …], header]` of a CALL. */
export type MySqlQueryResult = [unknown, unknown];

/**
 * A statement with the options that make its answer what the backend reads whatever the pool's
 * own: rows as objects (not `rowsAsArray`, not `nestTables`), columns cast the default way (a
 * pool's `typeCast` that turned VARBINARY into text would mangle keys).
 */
export interface MySqlQueryOptions {
  sql: string;
  values?: unknown[];
  rowsAsArray: false;
  nestTables: false;
  typeCast: (field: unknown, next: () => unknown) => unknown;
}

const defaultCast = (_field: unknown, next: () => unknown): unknown => next();

/** `sql` with its values and the options every statement of the backend is sent with. */
export const q = (sql: string, values?: unknown[]): MySqlQueryOptions => ({ sql, values, rowsAsArray: false, nestTables: false, typeCast: defaultCast });

/** One checked-out connection (`PoolConnection` of `mysql2/promise`). */
export interface MySqlConnectionLike {
  query(options: MySqlQueryOptions): Promise<MySqlQueryResult>;
  release(): void;
  /** Closes it at once (the pool forgets it). */
  destroy(): void;
  on(event: 'error' | 'end', listener: (error?: Error) => void): unknown;
  removeAllListeners(event?: string): unknown;
  /** The callback connection underneath (its socket: unref'd so the doorbell never holds the process). */
  readonly connection?: { readonly stream?: { unref?(): void } };
}

/** A `mysql2/promise` pool. */
export interface MySqlPoolLike {
  query(options: MySqlQueryOptions): Promise<MySqlQueryResult>;
  getConnection(): Promise<MySqlConnectionLike>;
  end(): Promise<void>;
  on(event: string, listener: (...args: any[]) => void): unknown;
}

/** A server error: its number (`ER_DUP_ENTRY` is 1062). Absent on a network error. */
export const errnoOf = (error: unknown): number | undefined => {
  const errno = (error as { errno?: unknown })?.errno;
  return typeof errno === 'number' && (error as { sqlState?: unknown }).sqlState !== undefined ? errno : undefined;
};

/** Server error numbers the backend tells apart. */
export const ER = {
  /** ER_DUP_ENTRY: the key's row exists (the uncontended insert lost to another row). */
  DUP_ENTRY: 1062,
  /** ER_LOCK_DEADLOCK: rolled back by the server; safe to run again. */
  DEADLOCK: 1213,
  /** ER_LOCK_WAIT_TIMEOUT. */
  LOCK_WAIT_TIMEOUT: 1205,
  /** ER_QUERY_INTERRUPTED: a KILL QUERY (the doorbell) ended the statement. */
  QUERY_INTERRUPTED: 1317,
  /** ER_STATEMENT_TIMEOUT (MariaDB max_statement_time) and MySQL's max_execution_time (3024). */
  STATEMENT_TIMEOUT: 1969,
  QUERY_TIMEOUT: 3024,
  /** ER_NO_SUCH_TABLE, ER_SP_DOES_NOT_EXIST: the schema is missing. */
  NO_SUCH_TABLE: 1146,
  SP_DOES_NOT_EXIST: 1305,
} as const;
