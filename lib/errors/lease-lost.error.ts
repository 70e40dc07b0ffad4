import { DistributedLockError } from './distributed-lock.error.js';

/** Why a lease is known or presumed lost. */
export type LeaseLossReason =
  /** Its validity ran out on the holder's monotonic clock (ttl minus drift allowance). */
  | 'expired'
  /** The backend says another owner (or no one) holds the key now. */
  | 'not-owner'
  /** The backend's session that kept the lease alive failed. */
  | 'session-lost'
  /** An operator ended it: `forceRelease()` (the next holder's token is larger). */
  | 'force-released'
  /** The application is shutting down and released it. */
  | 'shutdown'
  /** A leader's term ended by its own choice: `release()`, or the signal passed to `campaign()`. */
  | 'stepped-down';

/**
 * The lease ended while its holder still relied on it. This is the reason of `lease.signal`
 * when it aborts. With `purpose: 'correctness'`, writes carrying this lease's token must be
 * rejected by the resource from now on.
 */
export class LeaseLostError extends DistributedLockError {
  constructor(
    key: string,
    readonly reason: LeaseLossReason,
    detail?: string,
  ) {
    super(`Lease on "${key}" lost (${reason})${detail ? `: ${detail}` : ''}`, { key });
  }
}
