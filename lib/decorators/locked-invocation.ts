import { finalize, from, isObservable, Observable, type Subscription } from 'rxjs';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { Lease } from '../lease/lease.js';
import { checkKey } from '../options/lock-options.util.js';
import { untilLost } from '../lease/until-lost.util.js';
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
 * A method returning an Observable (without declaring it) keeps the lock until the Observable
 * finishes. The method's own error is rethrown as is; a release failure is only reported.
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
  if (isObservable(result)) return lockedSubscriptions(runner, lock, key, lease, result);
  await runner.releaseQuietly(lease);
  return result;
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
  return new Observable<unknown>((subscriber) => {
    let inner: Subscription | undefined;
    let unsubscribed = false;
    void (async () => {
      const key = keyOf(lock, args);
      const lease = await runner.acquireForMethod(lock, key);
      if (!lease) {
        runner.skipped(lock, key);
        subscriber.complete();
        return;
      }
      if (unsubscribed) {
        await runner.releaseQuietly(lease);
        return;
      }
      let source: unknown;
      try {
        runner.assertHeldAround(lease);
        source = runner.runInLease(lease, () => method.apply(thisArg, args));
      } catch (error) {
        await runner.releaseQuietly(lease);
        throw error;
      }
      let observable = isObservable(source) ? source : from(Promise.resolve(source));
      if (lock.policy.rejectOnLoss) observable = failOnLoss(lease, observable);
      inner = runner.runInLease(lease, () =>
        observable.pipe(finalize(() => void runner.releaseQuietly(lease))).subscribe(subscriber),
      );
    })().catch((error: unknown) => subscriber.error(error));
    return () => {
      unsubscribed = true;
      inner?.unsubscribe();
    };
  });
}

/**
 * An Observable the method returned without declaring it: the first subscription runs under the
 * lease the call already took; every later one (a `retry()`, a `repeat()`, a second subscriber)
 * re-runs the source's work, so it acquires the lock again first. Each releases when it ends.
 */
function lockedSubscriptions(runner: DecoratedCallRunner, lock: ResolvedMethodLock, key: string, firstLease: Lease, source: Observable<unknown>): Observable<unknown> {
  let unused: Lease | undefined = firstLease;
  return new Observable<unknown>((subscriber) => {
    let inner: Subscription | undefined;
    let unsubscribed = false;
    const taken = unused;
    unused = undefined;
    void (async () => {
      const lease = taken ?? (await runner.acquireForMethod(lock, key));
      if (!lease) {
        runner.skipped(lock, key);
        subscriber.complete();
        return;
      }
      if (unsubscribed || lease.signal.aborted) {
        await runner.releaseQuietly(lease);
        if (!unsubscribed) subscriber.error(lease.signal.reason);
        return;
      }
      const guarded = lock.policy.rejectOnLoss ? failOnLoss(lease, source) : source;
      inner = runner.runInLease(lease, () => guarded.pipe(finalize(() => void runner.releaseQuietly(lease))).subscribe(subscriber));
    })().catch((error: unknown) => subscriber.error(error));
    return () => {
      unsubscribed = true;
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
