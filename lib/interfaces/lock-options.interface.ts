import type { LockPurpose } from './distributed-lock-options.interface.js';

/** Options of one acquisition through `DistributedLockService`. */
export interface LockOptions {
  /** What the lock protects; decides the backend. Required. */
  purpose: LockPurpose;
  /** Lease time to live in milliseconds. @default module `defaults.ttl` (30000) */
  ttl?: number;
  /**
   * How long to wait for a busy lock, in milliseconds; 0 = do not wait.
   * @default module `defaults.wait` (10000) for `acquire`/`using`; always 0 for `tryAcquire`
   */
  wait?: number;
  /** Cancels waiting; the acquisition then rejects with this signal's reason. */
  signal?: AbortSignal;
  /** Use this backend instead of the one the purpose routes to. */
  backend?: string;
}
