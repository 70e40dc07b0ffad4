import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_LOCK_OPTIONS } from './distributed-lock.constants.js';
import { LEASE_INTERNALS, type Lease } from './engine/lease.js';
import { LockEngine } from './engine/lock-engine.js';
import type { LockEvents } from './engine/lock-events.js';
import { SKIPPED } from './engine/lock-request.js';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error.js';
import type { ListOptions, LockInfo, LockTarget } from './interfaces/lock-info.interface.js';
import type { CampaignOptions, LockOptions } from './interfaces/lock-options.interface.js';
import { checkKey, resolveCampaignOptions, resolveListOptions, resolveLockOptions, resolveLockTarget, type ResolvedLockOptions } from './options/lock-options.util.js';
import type { ResolvedModuleOptions } from './options/module-options.util.js';

/** How long a campaign started during shutdown waits before it is refused (see campaign()). */
const CAMPAIGN_REFUSAL_DELAY_MS = 100;

/** `rejectOnLoss` needs a wrapped call to reject: only `using()` and the decorator have one. */
function noWrappedCall(o: ResolvedLockOptions, where: string): ResolvedLockOptions {
  if (o.policy.rejectOnLoss) {
    throw new InvalidLockOptionsError('rejectOnLoss', 'applies to using() and @DistributedLock, which wrap a call', where);
  }
  return o;
}

/**
 * Distributed locks by key: validates each call's options against the module's backends and
 * hands it to the lock engine (owner ids, validity, waiting, reentrancy, shutdown).
 *
 * @example
 * constructor(private readonly locks: DistributedLockService) {}
 * await this.locks.using(`invoice:${id}`, { purpose: 'correctness', ttl: 5000 }, (lease) => pay(id, lease.token));
 */
@Injectable()
export class DistributedLockService {
  /** Lifecycle events: acquired, busy, released, release-failed, lost, renewed, renewal-failed. */
  readonly events: LockEvents;

  // TS-private, not #private: a Proxy of the service (tracing, instrumentation) must keep working.
  // The published .d.ts names them without their types.
  constructor(
    private readonly engine: LockEngine,
    @Inject(RESOLVED_LOCK_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {
    this.events = engine.events;
  }

  /**
   * Acquire `key`, waiting up to `opts.wait` ms (module default 10 s) while another owner holds it.
   * @throws LockBusyError still held by another owner after waiting
   * @throws LockBackendUnavailableError the backend could not be reached in time
   * @throws InvalidLockOptionsError bad key or options (before any backend call)
   * Several keys (an array) are one lease over all of them, all or nothing: taken in sorted order,
   * so callers naming them in any order never deadlock; `lease.keys` lists them.
   * @example
   * await using lease = await locks.acquire(`invoice:${id}`, { purpose: 'efficiency', ttl: 5000 });
   * await using both = await locks.acquire([`account:${from}`, `account:${to}`], { purpose: 'correctness' });
   */
  async acquire(key: string | readonly string[], opts: LockOptions): Promise<Lease> {
    const where = `acquire(${JSON.stringify(key)})`;
    return (await this.engine.acquire(noWrappedCall(resolveLockOptions(key, opts, this.options, where), where), 'throw'))!;
  }

  /** One attempt, no waiting: the lease, or `null` when another owner holds the key. */
  async tryAcquire(key: string | readonly string[], opts: Omit<LockOptions, 'wait'>): Promise<Lease | null> {
    const where = `tryAcquire(${JSON.stringify(key)})`;
    const wait = typeof opts === 'object' && opts !== null ? (opts as LockOptions).wait : undefined;
    if (wait !== undefined && wait !== 0) {
      // Ignoring it would hand a caller who meant to wait a null at once.
      throw new InvalidLockOptionsError('wait', `tryAcquire() never waits (got ${JSON.stringify(wait)}); use acquire() to wait`, where);
    }
    return this.engine.acquire(noWrappedCall(resolveLockOptions(key, { ...opts, wait: 0 }, this.options, where), where), 'skip');
  }

  /**
   * Run `fn` holding `key`, then release — also when `fn` throws. `fn` receives the lease, and
   * `current()` returns it anywhere below. A failed release is reported (logger, `release-failed`
   * event) and never replaces `fn`'s result or error.
   */
  async using<T>(key: string | readonly string[], opts: LockOptions, fn: (lease: Lease) => T | Promise<T>): Promise<T> {
    const where = `using(${JSON.stringify(key)})`;
    const request = resolveLockOptions(key, opts, this.options, where);
    // Before the lock is taken: nothing to run is bad input, not a lock held for nothing.
    if (typeof fn !== 'function') throw new InvalidLockOptionsError('fn', `must be the function to run under the lock, got ${typeof fn}`, where);
    const result = await this.engine.runLocked(request, 'throw', fn);
    // A 'throw' request never skips.
    return result as Exclude<typeof result, typeof SKIPPED>;
  }

  /**
   * Leader election: wait (in arrival order among candidates, on backends that queue) until this
   * caller leads `name`, then hold it — renewed every ttl/3, no `maxHold` — until `release()`, the
   * `signal` (steps down), loss, or shutdown (which hands leadership on at once). `lease.signal`
   * aborts when the term ends: leadership lost (a paused leader is replaced after its ttl or
   * session), or stepped down by `release()` or the signal (reason `'stepped-down'`);
   * `lease.token` grows with every term on fencing backends. Campaign again to lead again. Once
   * the application is shutting down a campaign is refused after 100 ms, never at once (a leader
   * loop must not spin and hold up `close()`).
   * @throws LockBackendUnavailableError the backend could not be reached, or shutdown began while waiting
   * @throws InvalidLockOptionsError bad name or options, or this async context holds `name` already
   * @example
   * const leadership = await locks.campaign('billing-leader', { purpose: 'correctness', ttl: 10_000 });
   */
  async campaign(name: string, opts: CampaignOptions): Promise<Lease> {
    const where = `campaign(${JSON.stringify(name)})`;
    const request = resolveCampaignOptions(name, opts, this.options, where);
    if (this.engine.context.reentrant(request.key, request.backend)) {
      throw new InvalidLockOptionsError('name', 'this async context holds it already: a leader lease is taken outside the work it guards', where);
    }
    if (this.engine.isShuttingDown) {
      // Refused, but not at once: a leader loop that campaigns again whenever a campaign ends
      // would otherwise spin without yielding and keep the application's close() from returning.
      await new Promise((resolve) => setTimeout(resolve, CAMPAIGN_REFUSAL_DELAY_MS).unref());
    }
    const lease = (await this.engine.acquire(request, 'throw'))!;
    const signal = request.signal;
    if (signal) {
      const stepDown = (): void => void lease.release().catch(() => undefined);
      if (signal.aborted) {
        // Aborted as the grant came in: the campaign stopped, so this caller does not lead.
        await lease.release().catch(() => undefined);
        throw signal.reason;
      } else {
        signal.addEventListener('abort', stepDown, { once: true });
        const forget = (): void => signal.removeEventListener('abort', stepDown);
        lease.signal.addEventListener('abort', forget, { once: true });
        void LEASE_INTERNALS.whenReleased(lease).then(forget, forget);
      }
    }
    return lease;
  }

  /**
   * The lease held by this async context (innermost first), or the one for `key`. Sees leases
   * taken by `using()` and `@DistributedLock`; `undefined` outside them.
   */
  current(key?: string): Lease | undefined {
    return this.engine.context.current(key);
  }

  /**
   * Who holds `key` on the backend `target` names (its purpose's, or `{ backend }`): what is left of
   * the hold, how many wait, the token (fencing backends); `null` when nobody holds it. Any holder,
   * not only this process's: for operators' pages and status endpoints.
   * @throws LockBackendUnavailableError the backend could not be reached in time
   */
  async inspect(key: string, target: LockTarget): Promise<LockInfo | null> {
    const where = `inspect(${JSON.stringify(key)})`;
    return this.engine.admin.inspect(checkKey(key, where), resolveLockTarget(target, this.options, where), where);
  }

  /**
   * End the hold on `key`, whoever holds it — a stuck job's lock, by an operator. The next waiter
   * gets the key (on fencing backends with a larger token, so a late write of the old holder is
   * refused); the old holder's `lease.signal` aborts with `LeaseLostError('force-released')` as
   * soon as its process learns it (at once in this process; see each backend's page in docs/backends).
   * false: nobody held it.
   * @throws LockBackendUnavailableError the backend could not be reached in time
   */
  async forceRelease(key: string, target: LockTarget): Promise<boolean> {
    const where = `forceRelease(${JSON.stringify(key)})`;
    return this.engine.admin.forceRelease(checkKey(key, where), resolveLockTarget(target, this.options, where), where);
  }

  /**
   * The keys held now on the backend `target` names (its purpose's, or `{ backend }`), by any
   * process, newest first, at most `limit` (default 100): for operators' pages (the lock board)
   * and status endpoints. Each entry is what `inspect()` reports. Redis is read with `SCAN` (never
   * `KEYS`), etcd with a range read of names; at most 10,000 keys are looked at per call.
   * @throws LockBackendUnavailableError the backend could not be reached in time
   */
  async list(target: LockTarget, options?: ListOptions): Promise<LockInfo[]> {
    const where = 'list()';
    const { prefix, limit } = resolveListOptions(options, where);
    return this.engine.admin.list(resolveLockTarget(target, this.options, where), prefix, limit, where);
  }

  /**
   * Every lease this async context holds, outermost first (nested `using()` / decorated calls).
   * Fencing helpers use it to find the lease that protects a resource.
   */
  currentLeases(): readonly Lease[] {
    return this.engine.context.leases();
  }
}
