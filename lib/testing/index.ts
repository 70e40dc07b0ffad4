/**
 * `nest-distributed-lock/testing`: lock your methods in unit tests without Redis or etcd.
 * NOT distributed — never use it to coordinate replicas.
 */
export { DistributedLockTestingModule, type DistributedLockTestingOptions } from './distributed-lock-testing.module.js';
export { TestingLockBackend } from './testing-lock-backend.js';
export {
  verifyLockBackend,
  CONFORMANCE_CHECKS,
  type VerifyLockBackendOptions,
  type BackendConformanceReport,
} from './conformance/verify-lock-backend.js';
