import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';

/** The longest `wait` of a transaction lock (PostgreSQL's lock_timeout is an int of ms). */
export const MAX_TRANSACTION_WAIT_MS = 2 ** 31 - 1;
/** The module's key bound (a transaction lock's keys are the service's keys). */
const MAX_KEY_LENGTH = 1024;
/** A lone UTF-16 surrogate (not valid Unicode). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * The arguments every transaction lock (`PgTransactionLock`, `MySqlTransactionLock`) refuses before
 * anything is sent: a key that is not a well-formed string of 1 to 1,024 characters, a `wait`
 * that is not a whole number of ms in range. Answers the wait (default 0).
 */
export function checkTransactionLockArgs(key: unknown, wait: unknown, where: string): number {
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH || LONE_SURROGATE.test(key)) {
    throw new InvalidLockOptionsError('key', `must be a well-formed string of 1 to ${MAX_KEY_LENGTH} characters`, where);
  }
  const ms = wait ?? 0;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_TRANSACTION_WAIT_MS) {
    throw new InvalidLockOptionsError('wait', `must be a whole number of ms from 0 to ${MAX_TRANSACTION_WAIT_MS}, got ${String(ms)}`, where);
  }
  return ms;
}
