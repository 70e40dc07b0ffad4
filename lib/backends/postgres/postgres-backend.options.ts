import { checkPositiveMs, checkSqlIdentifier, failOption, isPlainObject, MODULE_OPTIONS, rejectUnknown } from '../../common/checks.util.js';
import { describeValue } from '../../common/redact.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';
import type { PgPoolLike } from './postgres-client.interface.js';

/** Tokens from a durable sequence (with the WAL timeline): `correctness` may use it. */
export const POSTGRES_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: true, semaphore: true };

/** The defaults of `forRoot({ postgres })` and of `new PostgresBackend()` alike. */
export const POSTGRES_DEFAULTS = {
  schema: 'public',
  tablePrefix: 'nest_lock',
  maxConnections: 4,
  connectTimeoutMs: 2000,
  commandTimeoutMs: 2000,
  waiterHeartbeatMs: 500,
} as const;

/** The PostgreSQL backend (serves both purposes: its tokens are monotonic). */
export interface PostgresBackendOptions {
  /**
   * Connection string; the module opens a pool of at most `maxConnections` (+ one for LISTEN)
   * and closes it on shutdown.
   * @example 'postgres://app@127.0.0.1:5432/app'
   */
  connectionString?: string;
  /** A `pg.Pool` the application already owns. Never closed by this module. */
  pool?: PgPoolLike;
  /** Schema of the backend's tables and functions (created at start-up if absent). @default 'public' */
  schema?: string;
  /** Prefix of their names: `<prefix>_held`, `<prefix>_queue`, `<prefix>_acquire_v3`, `<prefix>_sem_held`, … @default 'nest_lock' */
  tablePrefix?: string;
  /** Connections of the pool the module opens (not of a `pool` you pass). @default 4 */
  maxConnections?: number;
  /** How long an operation waits for a connection before failing with `LockBackendUnavailableError`. @default 2000 */
  connectTimeoutMs?: number;
  /** How long one statement may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** What `new PostgresBackend()` takes (the module builds one from `PostgresBackendOptions`). */
export interface PostgresBackendConfig {
  pool: PgPoolLike;
  /** Close the pool in `close()` (true only when the module created it). */
  ownsPool: boolean;
  /** @default 'public' */
  schema?: string;
  /** @default 'nest_lock' */
  tablePrefix?: string;
  /** @default 2000 */
  connectTimeoutMs?: number;
  /** @default 2000 */
  commandTimeoutMs?: number;
  /**
   * A waiter re-checks at least this often even without a wake-up (refreshing its queue entry,
   * covering a lost notification); entries and hand-off reservations last 3× this. @default 500
   */
  waiterHeartbeatMs?: number;
  name?: string;
}

/** `PostgresBackendOptions` after `resolvePostgresOptions()`: defaults filled in. */
export type ResolvedPostgresOptions = Pick<PostgresBackendOptions, 'connectionString' | 'pool'> &
  Required<Pick<PostgresBackendOptions, 'schema' | 'tablePrefix' | 'maxConnections' | 'connectTimeoutMs' | 'commandTimeoutMs'>>;

/** The fields `postgres` accepts, in the order errors list them; `satisfies` keeps it in step with the type. */
const FIELDS = Object.keys({
  connectionString: 1,
  pool: 1,
  schema: 1,
  tablePrefix: 1,
  maxConnections: 1,
  connectTimeoutMs: 1,
  commandTimeoutMs: 1,
} satisfies Record<keyof PostgresBackendOptions, 1>);

/** A plain SQL identifier (lower case, as PostgreSQL folds them): spliced into DDL, so nothing else. */
export const checkIdentifier = checkSqlIdentifier;

/** `forRoot({ postgres })` checked, with defaults. */
export function resolvePostgresOptions(raw: unknown, field: string): ResolvedPostgresOptions {
  if (!isPlainObject(raw)) failOption(field, "must be an object such as { connectionString: 'postgres://127.0.0.1:5432/app' }");
  rejectUnknown(raw, FIELDS, `${field}.`);
  const { connectionString, pool } = raw;
  if (pool !== undefined) {
    const p = pool as Record<string, unknown>;
    for (const method of ['query', 'connect', 'end'] as const) {
      if (typeof p?.[method] !== 'function') failOption(`${field}.pool`, `must be a pg Pool (no ${method}())`);
    }
    if (connectionString !== undefined) failOption(`${field}.pool`, 'give either pool or connectionString, not both');
    if (raw.maxConnections !== undefined) failOption(`${field}.maxConnections`, 'applies to the pool the module opens, not to a pool you pass');
  } else if (connectionString === undefined) {
    failOption(`${field}.connectionString`, "is required (or pass pool): for example 'postgres://127.0.0.1:5432/app'");
  } else if (typeof connectionString !== 'string' || !/^postgres(ql)?:\/\/./i.test(connectionString)) {
    failOption(`${field}.connectionString`, `must be a postgres:// or postgresql:// URL, got ${describeValue(connectionString)}`);
  }
  const maxConnections = raw.maxConnections ?? POSTGRES_DEFAULTS.maxConnections;
  if (typeof maxConnections !== 'number' || !Number.isInteger(maxConnections) || maxConnections < 1 || maxConnections > 1000) {
    failOption(`${field}.maxConnections`, `must be a whole number from 1 to 1000, got ${String(maxConnections)}`);
  }
  return {
    connectionString: connectionString as string | undefined,
    pool: pool as PgPoolLike | undefined,
    schema: checkIdentifier(raw.schema ?? POSTGRES_DEFAULTS.schema, `${field}.schema`),
    tablePrefix: checkIdentifier(raw.tablePrefix ?? POSTGRES_DEFAULTS.tablePrefix, `${field}.tablePrefix`),
    maxConnections,
    connectTimeoutMs: checkPositiveMs(raw.connectTimeoutMs ?? POSTGRES_DEFAULTS.connectTimeoutMs, `${field}.connectTimeoutMs`, MODULE_OPTIONS),
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? POSTGRES_DEFAULTS.commandTimeoutMs, `${field}.commandTimeoutMs`, MODULE_OPTIONS),
  };
}
