import { finalize, from, isObservable, Observable, type Subscription } from 'rxjs';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { Lease } from '../engine/lease.js';
import { checkKey } from '../options/lock-options.util.js';
import { untilLost } from '../engine/until-lost.util.js';
import type { DecoratedCallRunner, ResolvedMethodLock } from './decorated-method.registry.js';

/** The key of one call: evaluated before any backend call; a bad key fails naming the method. */
export function keyOf(lock: ResolvedMethodLock, args: unknown[]): string {
  if (typeof lock.key === 'string') return lock.key;
  let key: unknown;
  try {
    key = lock.key(...args);
  } catch (error) {
    const invalid = new InvalidLockOptionsError('key', `the key function threw: ${(error as Error)?.message ?? error}`, lock.where);
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
  return checkKey(key, lock.where);
}

/**
 * Acquire, run the method inside the lease's async context, release when its Promise settles.
 * An Observable returned without being declared is locked per subscription (see below). The
 * method's own error is rethrown as is; a release failure is only reported.
 */
export async function invokeLocked(
  runner: DecoratedCallRunner,
  lock: ResolvedMethodLock,
  thisArg: unknown,
  method: Function,
  args: unknown[],
): Promise<unknown> {
  const key = keyOf(lock, args);
  const lease = await runner.acquireForMethod(lock, key);
  if (!lease) {
    runner.skipped(lock, key);
    return undefined;
  }
  let result: unknown;
  try {
    // Lost between the grant and now (shutdown began, it ran out), or a lease this call is nested
    // in (a stacked or overriding declaration) was lost while it waited: the method must not start.
    runner.assertHeldAround(lease);
    const running = runner.runInLease(lease, () => method.apply(thisArg, args));
    result = await (lock.policy.rejectOnLoss ? untilLost(lease, running) : running);
  } catch (error) {
    await runner.releaseQuietly(lease);
    throw error;
  }
  await runner.releaseQuietly(lease);
  // An Observable it did not declare: the method ran under the lock, the Observable's work runs
  // when it is subscribed — perhaps much later, perhaps never. Holding the key until then would
  // block every other replica for nothing (until the ttl, if nobody ever subscribes); each
  // subscription takes the lock itself instead.
  return isObservable(result) ? lockedSubscriptions(runner, lock, key, result) : result;
}

/**
 * For methods declared to return an Observable: stay cold. Each subscription acquires, runs the
 * method, and releases when the Observable completes, errors or is unsubscribed.
 */
export function invokeLockedObservable(
  runner: DecoratedCallRunner,
  lock: ResolvedMethodLock,
  thisArg: unknown,
  method: Function,
  args: unknown[],
): Observable<unknown> {
  return lockedEachSubscription(runner, lock, () => keyOf(lock, args), (lease) => {
    const source = runner.runInLease(lease, () => method.apply(thisArg, args));
    return isObservable(source) ? source : from(Promise.resolve(source));
  });
}

/**
 * An Observable the method returned without declaring it (the method itself already ran under
 * the lock, released since): every subscription — the first, a `retry()`, a `repeat()`, a second
 * subscriber — runs the source's work, so each acquires the lock first and releases when it ends.
 */
function lockedSubscriptions(runner: DecoratedCallRunner, lock: ResolvedMethodLock, key: string, source: Observable<unknown>): Observable<unknown> {
  return lockedEachSubscription(runner, lock, () => key, () => source);
}

/**
 * Each subscription: acquire (an unsubscription stops the wait, and a grant that comes anyway is
 * given back), then subscribe to the work inside the lease's async context, and release when it
 * completes, errors or is unsubscribed. Lost before the work starts: the error, no work.
 */
function lockedEachSubscription(
  runner: DecoratedCallRunner,
  lock: ResolvedMethodLock,
  keyFor: () => string,
  work: (lease: Lease) => Observable<unknown>,
): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    let inner: Subscription | undefined;
    const unsubscribed = new AbortController();
    void (async () => {
      const key = keyFor();
      const lease = await runner.acquireForMethod(lock, key, unsubscribed.signal);
      if (!lease) {
        runner.skipped(lock, key);
        subscriber.complete();
        return;
      }
      if (unsubscribed.signal.aborted) {
        await runner.releaseQuietly(lease);
        return;
      }
      let observable: Observable<unknown>;
      try {
        runner.assertHeldAround(lease);
        observable = work(lease);
      } catch (error) {
        await runner.releaseQuietly(lease);
        throw error;
      }
      if (lock.policy.rejectOnLoss) observable = failOnLoss(lease, observable);
      inner = runner.runInLease(lease, () => observable.pipe(finalize(() => void runner.releaseQuietly(lease))).subscribe(subscriber));
    })().catch((error: unknown) => {
      // Unsubscribed: nobody listens; the abort (or whatever came after it) is not an error.
      if (!unsubscribed.signal.aborted) subscriber.error(error);
    });
    return () => {
      unsubscribed.abort(new Error('unsubscribed'));
      inner?.unsubscribe();
    };
  });
}

/** Error with the lease's `LeaseLostError` the moment it is lost (rejectOnLoss for Observables). */
function failOnLoss<T>(lease: Lease, source: Observable<T>): Observable<T> {
  return new Observable<T>((subscriber) => {
    const signal = lease.signal;
    const onAbort = (): void => subscriber.error(signal.reason);
    if (signal.aborted) {
      onAbort();
      return undefined;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    const inner = source.subscribe(subscriber);
    return () => {
      signal.removeEventListener('abort', onAbort);
      inner.unsubscribe();
    };
  });
}
