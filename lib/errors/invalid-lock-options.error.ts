import { DistributedLockError } from './distributed-lock.error.js';

/** Options that cannot work. `field` names the offending option (`redis.url`, `ttl`, …). */
export class InvalidLockOptionsError extends DistributedLockError {
  constructor(
    readonly field: string,
    problem: string,
    /** Where the options came from: `DistributedLockModule.forRoot`, `Class.method`, `acquire("key")`. */
    readonly where?: string,
  ) {
    super(`Invalid lock option "${field}"${where ? ` in ${where}` : ''}: ${problem}`);
  }
}
