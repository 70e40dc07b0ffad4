import type { LockPurpose } from './distributed-lock-options.interface.js';
import type { LeaseLifetimeOptions, LockMode } from './lock-options.interface.js';

/** What a decorated method does when another owner holds its lock. */
export type OnBusy = 'throw' | 'skip' | 'wait';

/**
 * Options of `@DistributedLock`. `A` is the method's leading parameters, so a key function is
 * checked against them.
 */
export interface DistributedLockOptions<A extends unknown[] = any[]> extends LeaseLifetimeOptions {
  /** What the lock protects: `'efficiency'` or `'correctness'`. Required. */
  purpose: LockPurpose;
  /**
   * The lock key: a string, or a function of the method's arguments. An array of keys (or a
   * function returning one) takes one lease over all of them, all or nothing (`lease.keys`).
   * @default '<Class>.<method>'
   * @example key: (orderId: string) => `order:${orderId}`
   */
  key?: string | readonly string[] | ((...args: A) => string | readonly string[]);
  /** Lease time to live, ms. @default module `defaults.ttl` */
  ttl?: number;
  /** How long to wait for a busy lock, ms (implies `onBusy: 'wait'`). @default module `defaults.wait` */
  wait?: number;
  /**
   * When the lock is held elsewhere:
   * - `'throw'`: reject with `LockBusyError` (HTTP: 409 Conflict) — default for controller handlers
   *   and plain provider methods;
   * - `'skip'`: do not run, resolve `undefined`, log at debug level — default for `@Cron`,
   *   `@Interval`, `@Timeout` and `@OnEvent` methods;
   * - `'wait'`: queue up to `wait` ms, then `LockBusyError`.
   */
  onBusy?: OnBusy;
  /**
   * Reject the call with `LeaseLostError` as soon as the lease's signal aborts, without waiting
   * for the method (which should stop cooperatively via `current().signal`). @default false
   */
  rejectOnLoss?: boolean;
  /** Use this backend instead of the one the purpose routes to. */
  backend?: string;
  /** A semaphore: at most this many holders of the key at once (see `LockOptions.permits`). @default 1 */
  permits?: number;
  /** A read-write lock's mode (see `LockOptions.mode`). @default 'write' (the plain lock) */
  mode?: LockMode;
}
