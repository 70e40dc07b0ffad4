import { finalize, from, isObservable, Observable, tap, type Subscription } from 'rxjs';
import type { Lease } from '../engine/lease.js';
import type { LockEngine } from '../engine/lock-engine.js';
import { SKIPPED, type LockRequest, type WhenBusy } from '../engine/lock-request.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { ResolvedMethodLock } from '../options/decorator-options.util.js';
import { checkKeys, upgradeableKeys } from '../options/lock-options.util.js';

/** One call's key, or keys (sorted, distinct: one lease over all of them). */
type CallKeys = ReturnType<typeof checkKeys>;

/** The key(s) of one call: evaluated before any backend call; a bad key fails naming the method. */
export function keyOf(lock: ResolvedMethodLock, args: unknown[]): CallKeys {
  if (typeof lock.key === 'string') return { key: lock.key };
  if (typeof lock.key !== 'function') return checkKeys(lock.key, lock.where);
  let key: unknown;
  try {
    key = lock.key(...args);
  } catch (error) {
    const invalid = new InvalidLockOptionsError('key', `the key function threw: ${(error as Error)?.message ?? error}`, lock.where);
    (invalid as { cause?: unknown }).cause = error;
    throw invalid;
  }
  const keys = checkKeys(key, lock.where);
  if (keys.keys && lock.permits > 1) {
    throw new InvalidLockOptionsError('permits', 'a semaphore takes one key; the key function returned several', lock.where);
  }
  if (keys.keys && lock.mode === 'upgradeable') throw upgradeableKeys(lock.where);
  return keys;
}

/** One call's request to the engine (`onBusy: 'wait'` keeps the wait; whenBusyOf() says what a busy key does). */
function requestOf(lock: ResolvedMethodLock, keys: CallKeys, signal?: AbortSignal): LockRequest {
  const wait = lock.onBusy === 'wait' ? lock.wait : 0;
  // A literal of one shape (no spread: slow on Node 20, see resolveLockOptions).
  return { key: keys.key, keys: keys.keys, purpose: lock.purpose, ttl: lock.ttl, wait, backend: lock.backend, permits: lock.permits, mode: lock.mode, policy: lock.policy, signal, where: lock.where };
}

/** What a call does when the key is held after its wait (see requestOf). */
const whenBusyOf = (lock: ResolvedMethodLock): WhenBusy => (lock.onBusy === 'skip' ? 'skip' : 'throw');

/**
 * Acquire, run the method inside the lease's async context, release when its Promise settles.
 * An Observable returned without being declared is locked per subscription (see below). The
 * method's own error is rethrown as is; a release failure is only reported.
 */
export async function invokeLocked(engine: LockEngine, lock: ResolvedMethodLock, thisArg: unknown, method: Function, args: unknown[]): Promise<unknown> {
  const key = keyOf(lock, args);
  const result = await engine.runLocked(requestOf(lock, key), whenBusyOf(lock), () => method.apply(thisArg, args));
  if (result === SKIPPED) return undefined;
  // An Observable it did not declare: the method ran under the lock, the Observable's work runs
  // when it is subscribed — perhaps much later, perhaps never. Holding the key until then would
  // block every other replica for nothing (until the ttl, if nobody ever subscribes); each
  // subscription takes the lock itself instead.
  return isObservable(result) ? lockedEachSubscription(engine, lock, () => key, () => result) : result;
}

/**
 * For methods declared to return an Observable: stay cold. Each subscription acquires, runs the
 * method, and releases when the Observable completes, errors or is unsubscribed.
 */
export function invokeLockedObservable(engine: LockEngine, lock: ResolvedMethodLock, thisArg: unknown, method: Function, args: unknown[]): Observable<unknown> {
  return lockedEachSubscription(engine, lock, () => keyOf(lock, args), () => {
    const source = method.apply(thisArg, args) as unknown;
    return isObservable(source) ? source : from(Promise.resolve(source));
  });
}

/**
 * Each subscription — the first, a `retry()`, a `repeat()`, a second subscriber — runs the work,
 * so each is one locked call: acquire (an unsubscription stops the wait, and a grant that comes
 * anyway is given back), subscribe to the work inside the lease's async context, release when it
 * completes, errors or is unsubscribed. Lost before the work starts: the error, no work.
 */
function lockedEachSubscription(engine: LockEngine, lock: ResolvedMethodLock, keyFor: () => CallKeys, work: (lease: Lease) => Observable<unknown>): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    let inner: Subscription | undefined;
    const unsubscribed = new AbortController();
    const subscription = (lease: Lease): Promise<void> | undefined => {
      // Granted as the subscriber left: nothing to run, the lock goes straight back.
      if (unsubscribed.signal.aborted) return undefined;
      let observable = work(lease);
      if (lock.policy.rejectOnLoss) observable = failOnLoss(lease, observable);
      // The locked call lasts as long as the subscription, and its release starts the moment the
      // work ends — on its complete or error notification, before the subscriber hears of it, or
      // at unsubscription. A repeat(), a retry() or a complete callback may subscribe again at
      // once (synchronously, for a source that completes on subscribe), inside this work's async
      // context: it must find this lease ended and take a fresh one, never re-enter it. (A failed
      // release is reported by the lease, never thrown; the engine's own release is a no-op then.)
      return new Promise<void>((ended) => {
        const end = (): void => {
          void lease[Symbol.asyncDispose]();
          ended();
        };
        inner = observable.pipe(tap({ complete: end, error: end }), finalize(end)).subscribe(subscriber);
      });
    };
    void (async () => {
      const result = await engine.runLocked(requestOf(lock, keyFor(), unsubscribed.signal), whenBusyOf(lock), subscription);
      if (result === SKIPPED) subscriber.complete();
    })().catch((error: unknown) => {
      // Unsubscribed: nobody listens; the abort (or whatever came after it) is not an error. A
      // loss the work already reported (rejectOnLoss) is not reported twice.
      if (!unsubscribed.signal.aborted && !subscriber.closed) subscriber.error(error);
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
