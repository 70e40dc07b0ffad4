import { DistributedLockError } from './distributed-lock.error.js';

/**
 * Someone else holds the lock and the caller chose not to wait (`tryAcquire`, `onBusy: 'throw'`)
 * or waited `waitedMs` without getting it. The backend answered: this is not an outage.
 */
export class LockBusyError extends DistributedLockError {
  constructor(
    key: string,
    readonly purpose: string,
    readonly backend: string,
    readonly waitedMs: number,
    /** When the current holder's lease ends, if the backend said (milliseconds from now). */
    readonly retryAfterMs?: number,
  ) {
    super(
      `Lock "${key}" (${purpose}, backend "${backend}") is held by another owner` +
        (waitedMs > 0 ? `; gave up after waiting ${Math.round(waitedMs)} ms` : '; not waiting') +
        (retryAfterMs !== undefined && retryAfterMs >= 0 ? `; the holder's lease ends in ${retryAfterMs} ms` : ''),
      { key },
    );
  }
}
