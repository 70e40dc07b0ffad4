import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';

/** Most permits a semaphore may have: a larger number is a bug (a count of rows, a byte size). */
export const MAX_PERMITS = 10_000;

/**
 * The error of an acquisition that finds `key` held or queued with another number of permits
 * (a plain lock counts as 1): two groups with different limits would each admit their own.
 */
export function permitsMismatch(key: string, found: number, asked: number): InvalidLockOptionsError {
  return new InvalidLockOptionsError(
    'permits',
    `"${key}" is held or awaited with permits ${found}${found === 1 ? ' (a plain lock)' : ''}, this call asks for ${asked}: ` +
      'every caller of one key must agree on permits',
  );
}
