import type { LockBackend } from '../backends/lock-backend.interface.js';
import type { EtcdClientLike } from '../backends/etcd/etcd-client.interface.js';
import type { RedisClientLike } from '../backends/redis/redis-client.interface.js';

/**
 * What a lock is for — the one question every lock must answer ("what happens if it fails?").
 * - `efficiency`: avoid duplicate work; a rare double run is acceptable. Any backend.
 * - `correctness`: two holders would corrupt data. Only a backend with fencing tokens.
 */
export type LockPurpose = 'efficiency' | 'correctness';

export const LOCK_PURPOSES: readonly LockPurpose[] = ['efficiency', 'correctness'];

/** The Redis backend (serves `efficiency` locks; it has no fencing tokens). */
export interface RedisBackendOptions {
  /**
   * Connection URL; the module opens this client and closes it on shutdown.
   * @example 'redis://127.0.0.1:6379/0'
   */
  url?: string;
  /**
   * ioredis options (host, port, password, tls, sentinels + name, …). With `url`, they are
   * merged over it. The module opens and closes this client.
   */
  options?: Record<string, unknown>;
  /**
   * An ioredis `Redis` (standalone or Sentinel) or `Cluster` the application already owns.
   * Never closed by this module. Mutually exclusive with `url` / `options`.
   */
  client?: RedisClientLike;
  /** Prefix of every key this backend writes. @default 'lock:' */
  keyPrefix?: string;
  /**
   * How long an operation waits for a connection before failing with
   * `LockBackendUnavailableError`. @default 2000
   */
  connectTimeoutMs?: number;
  /** How long one command may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** The etcd backend (serves `correctness` locks: its revision is the fencing token). */
export interface EtcdBackendOptions {
  /**
   * Endpoint(s); the module opens this client and closes it on shutdown.
   * @example '127.0.0.1:2379' or ['10.0.0.1:2379', '10.0.0.2:2379', '10.0.0.3:2379']
   */
  hosts?: string | string[];
  /** More etcd3 client options (auth, credentials for TLS, grpcOptions, dialTimeout, …). */
  options?: Record<string, unknown>;
  /** An `Etcd3` client the application already owns. Never closed by this module. */
  client?: EtcdClientLike;
  /** Prefix of every key this backend writes. @default 'lock/' */
  prefix?: string;
  /**
   * TTL of the session lease all lock keys ride on, in whole seconds. A crashed or paused
   * holder's key disappears at most this long after its last keep-alive. @default 10
   */
  sessionTtlSeconds?: number;
  /** How long one request may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** The in-memory backend: one process only, monotonic tokens. For tests, never for production. */
export interface MemoryBackendOptions {
  /** Name under which it is registered. @default 'memory' */
  name?: string;
}

/** Defaults applied to every lock that does not set its own. */
export interface LockDefaults {
  /** Lease time to live in milliseconds. @default 30000 */
  ttl?: number;
  /** How long `acquire()` waits for a busy lock, in milliseconds. @default 10000 */
  wait?: number;
  /** Renew leases automatically (each lock must then have a `maxHold`). @default false */
  watchdog?: boolean;
  /** Default cap on the total hold time of watchdog-renewed leases, ms. */
  maxHold?: number;
  /** Lock-delay after an involuntary loss, ms. @default 0 */
  lockDelay?: number;
}

/** Options of `DistributedLockModule.forRoot()` / the factory of `forRootAsync()`. */
export interface DistributedLockModuleOptions {
  /** Configure the Redis backend. @example { url: 'redis://127.0.0.1:6379' } */
  redis?: RedisBackendOptions;
  /** Configure the etcd backend. @example { hosts: '127.0.0.1:2379' } */
  etcd?: EtcdBackendOptions;
  /** Enable the in-memory backend (single process; for tests). */
  memory?: boolean | MemoryBackendOptions;
  /** Further backends by name (your own `LockBackend` implementations). */
  backends?: Record<string, LockBackend>;
  /**
   * Which backend serves each purpose. By default `efficiency` goes to Redis (else the only
   * configured backend) and `correctness` to a fencing backend (etcd first).
   */
  purposes?: Partial<Record<LockPurpose, string>>;
  defaults?: LockDefaults;
  /**
   * Fraction of the ttl subtracted from a lease's validity for clock drift between this process
   * and the server (plus 2 ms). @default 0.01
   */
  driftFactor?: number;
  /**
   * OpenTelemetry metrics through `@opentelemetry/api` (an optional peer; nothing is recorded
   * without it or without an SDK). `includeKey` adds the lock key as a label — unbounded
   * cardinality, so off by default. @default true
   */
  metrics?: boolean | { includeKey?: boolean };
}
