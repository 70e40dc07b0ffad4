import type { BuiltInBackendOptions } from '../backends/backend-registry.js';
import type { LockBackend } from '../backends/lock-backend.interface.js';

/**
 * What a lock is for — the one question every lock must answer ("what happens if it fails?").
 * - `efficiency`: avoid duplicate work; a rare double run is acceptable. Any backend.
 * - `correctness`: two holders would corrupt data. Only a backend with fencing tokens.
 */
export type LockPurpose = 'efficiency' | 'correctness';

export const LOCK_PURPOSES: readonly LockPurpose[] = ['efficiency', 'correctness'];

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

/**
 * Options of `DistributedLockModule.forRoot()` / the factory of `forRootAsync()`. The built-in
 * backends' fields (`redis`, `etcd`, `memory`) come from the backend registry: each backend's
 * folder declares its option type.
 */
export interface DistributedLockModuleOptions extends BuiltInBackendOptions {
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
