import { checkPositiveMs, checkSqlIdentifier, failOption, isPlainObject, MODULE_OPTIONS, rejectUnknown } from '../../common/checks.util.js';
import { describeValue } from '../../common/redact.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';
import type { MySqlPoolLike } from './mysql-client.interface.js';

/** Tokens from a durable AUTO_INCREMENT: `correctness` may use it. */
export const MYSQL_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: true, semaphore: true };

/** The defaults of `forRoot({ mysql })` and of `new MySqlBackend()` alike. */
export const MYSQL_DEFAULTS = {
  tablePrefix: 'nest_lock',
  maxConnections: 4,
  connectTimeoutMs: 2000,
  commandTimeoutMs: 2000,
  waiterHeartbeatMs: 500,
} as const;

/** The MySQL / MariaDB backend (serves both purposes: its tokens are monotonic). */
export interface MySqlBackendOptions {
  /**
   * Connection URL with the database the backend's tables go in; the module opens a pool of at most
   * `maxConnections` (+ two for its doorbell) and closes it on shutdown.
   * @example 'mysql://app:secret@127.0.0.1:3306/app'
   */
  uri?: string;
  /** A mysql2 promise pool (`mysql2/promise` `createPool()`) the application already owns; the doorbell keeps two of its connections. Never closed by this module. */
  pool?: MySqlPoolLike;
  /** Prefix of the backend's tables and procedures: `<prefix>_held`, `<prefix>_queue`, `<prefix>_acquire_v1`, … @default 'nest_lock' */
  tablePrefix?: string;
  /** Connections of the pool the module opens (not of a `pool` you pass). @default 4 */
  maxConnections?: number;
  /** How long an operation waits for a connection before failing with `LockBackendUnavailableError`. @default 2000 */
  connectTimeoutMs?: number;
  /** How long one statement may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** What `new MySqlBackend()` takes (the module builds one from `MySqlBackendOptions`). */
export interface MySqlBackendConfig {
  pool: MySqlPoolLike;
  /** Close the pool in `close()` (true only when the module created it). */
  ownsPool: boolean;
  /** @default 'nest_lock' */
  tablePrefix?: string;
  /** @default 2000 */
  connectTimeoutMs?: number;
  /** @default 2000 */
  commandTimeoutMs?: number;
  /**
   * A waiter re-checks at least this often even without a wake-up (refreshing its queue entry,
   * covering a lost doorbell); queue entries last 3× this. @default 500
   */
  waiterHeartbeatMs?: number;
  name?: string;
}

/** `MySqlBackendOptions` after `resolveMySqlOptions()`: defaults filled in. */
export type ResolvedMySqlOptions = Pick<MySqlBackendOptions, 'uri' | 'pool'> &
  Required<Pick<MySqlBackendOptions, 'tablePrefix' | 'maxConnections' | 'connectTimeoutMs' | 'commandTimeoutMs'>>;

/** The fields `mysql` accepts, in the order errors list them; `satisfies` keeps it in step with the type. */
const FIELDS = Object.keys({
  uri: 1,
  pool: 1,
  tablePrefix: 1,
  maxConnections: 1,
  connectTimeoutMs: 1,
  commandTimeoutMs: 1,
} satisfies Record<keyof MySqlBackendOptions, 1>);

/** A plain lower-case SQL identifier: spliced into DDL, so nothing else (table names are case-sensitive on Linux). */
export const checkMySqlIdentifier = checkSqlIdentifier;

/** `forRoot({ mysql })` checked, with defaults. */
export function resolveMySqlOptions(raw: unknown, field: string): ResolvedMySqlOptions {
  if (!isPlainObject(raw)) failOption(field, "must be an object such as { uri: 'mysql://app@127.0.0.1:3306/app' }");
  rejectUnknown(raw, FIELDS, `${field}.`);
  const { uri, pool } = raw;
  if (pool !== undefined) {
    const p = pool as Record<string, unknown>;
    for (const method of ['query', 'getConnection', 'end'] as const) {
      if (typeof p?.[method] !== 'function') failOption(`${field}.pool`, `must be a mysql2 promise Pool (no ${method}())`);
    }
    // A callback pool (require('mysql2').createPool) answers query() with undefined, not a promise.
    if (typeof p.promise === 'function' && !('pool' in p)) {
      failOption(`${field}.pool`, "must be a mysql2 promise Pool: pass pool.promise(), or create it from 'mysql2/promise'");
    }
    if (uri !== undefined) failOption(`${field}.pool`, 'give either pool or uri, not both');
    // The doorbell keeps two connections for good: a pool of two or fewer would leave none for calls.
    const limit = (p as { pool?: { config?: { connectionLimit?: unknown } } }).pool?.config?.connectionLimit;
    if (typeof limit === 'number' && limit < 3) failOption(`${field}.pool`, `has connectionLimit ${limit}: the backend's doorbell keeps two connections, so it needs at least 3`);
    if (raw.maxConnections !== undefined) failOption(`${field}.maxConnections`, 'applies to the pool the module opens, not to a pool you pass');
  } else if (uri === undefined) {
    failOption(`${field}.uri`, "is required (or pass pool): for example 'mysql://app@127.0.0.1:3306/app'");
  } else if (typeof uri !== 'string' || !/^(mysql|mariadb):\/\/[^/]+\/[^/?#]+/i.test(uri)) {
    failOption(`${field}.uri`, `must be a mysql:// URL naming the database (mysql://user@host:3306/app), got ${describeValue(uri)}`);
  }
  const maxConnections = raw.maxConnections ?? MYSQL_DEFAULTS.maxConnections;
  if (typeof maxConnections !== 'number' || !Number.isInteger(maxConnections) || maxConnections < 1 || maxConnections > 1000) {
    failOption(`${field}.maxConnections`, `must be a whole number from 1 to 1000, got ${String(maxConnections)}`);
  }
  return {
    uri: uri as string | undefined,
    pool: pool as MySqlPoolLike | undefined,
    tablePrefix: checkMySqlIdentifier(raw.tablePrefix ?? MYSQL_DEFAULTS.tablePrefix, `${field}.tablePrefix`),
    maxConnections,
    connectTimeoutMs: checkPositiveMs(raw.connectTimeoutMs ?? MYSQL_DEFAULTS.connectTimeoutMs, `${field}.connectTimeoutMs`, MODULE_OPTIONS),
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? MYSQL_DEFAULTS.commandTimeoutMs, `${field}.commandTimeoutMs`, MODULE_OPTIONS),
  };
}
