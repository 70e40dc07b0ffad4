export { DistributedLockError } from './distributed-lock.error.js';
export { LockBusyError } from './lock-busy.error.js';
export { LockBackendUnavailableError } from './lock-backend-unavailable.error.js';
export { LeaseLostError, type LeaseLossReason } from './lease-lost.error.js';
export { StaleFencingTokenError } from './stale-fencing-token.error.js';
export { InvalidLockOptionsError } from './invalid-lock-options.error.js';
