import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';

/** Most permits a semaphore may have: a larger number is a bug (a count of rows, a byte size). */
export const MAX_PERMITS = 10_000;

/** A backend's semaphore view of `permits`, made once per permits value and kept in `views`. */
export function viewFor<V>(views: Map<number, V>, permits: number, make: () => V): V {
  let view = views.get(permits);
  if (view === undefined) views.set(permits, (view = make()));
  return view;
}

/** The permits values a backend has views of, as a per-key cache's entries (see LockBackend.bookkeeping). */
export const viewCache = (views: Map<number, unknown>): string[] => [...views.keys()].map(String);

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
