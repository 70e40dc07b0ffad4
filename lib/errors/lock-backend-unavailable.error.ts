import { DistributedLockError } from './distributed-lock.error.js';

/**
 * The backend could not be reached or did not answer within its timeout. Whether the lock is
 * free is unknown, so the protected work must not run.
 */
export class LockBackendUnavailableError extends DistributedLockError {
  constructor(
    readonly backend: string,
    readonly operation: string,
    detail: string,
    options?: { key?: string; cause?: unknown },
  ) {
    super(
      `Lock backend "${backend}" is unavailable (${operation}` +
        (options?.key !== undefined ? ` of "${options.key}"` : '') +
        `): ${detail}`,
      options,
    );
  }
}
