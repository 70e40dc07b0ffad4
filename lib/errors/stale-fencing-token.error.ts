import { DistributedLockError } from './distributed-lock.error.js';

/** A resource refused an operation because a newer fencing token has already been seen for it. */
export class StaleFencingTokenError extends DistributedLockError {
  constructor(
    key: string,
    readonly token: bigint,
    readonly fence: bigint,
  ) {
    super(`Stale fencing token ${token} for "${key}": the resource has already seen token ${fence}`, { key });
  }
}
