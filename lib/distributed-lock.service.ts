import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import { setMaxListeners } from 'node:events';
import { randomUUID } from 'node:crypto';
import { LOGGER_CONTEXT, RESOLVED_LOCK_OPTIONS } from './distributed-lock.constants.js';
import { LockEvents } from './distributed-lock.events.js';
import type { DecoratedCallRunner, ResolvedMethodLock } from './decorators/decorated-method.registry.js';
import { LockBackendUnavailableError } from './errors/lock-backend-unavailable.error.js';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error.js';
import { LockBusyError } from './errors/lock-busy.error.js';
import type { LeaseLostError } from './errors/lease-lost.error.js';
import { LOCK_BACKENDS, type LockBackend } from './backends/lock-backend.interface.js';
import type { LockOptions } from './interfaces/lock-options.interface.js';
import { Lease } from './engine/lease.js';
import { LeaseCore, type LeaseObserver } from './engine/lease-core.js';
import { untilLost } from './engine/until-lost.util.js';
import { monotonicNow, validUntil } from './common/validity.util.js';
import { linkSignals, sleepUnlessAborted, unlessAborted } from './engine/signals.util.js';
import { resolveLockOptions, type ResolvedLockOptions } from './options/lock-options.util.js';
import type { ResolvedModuleOptions } from './options/module-options.util.js';

interface LockContext {
  /** Leases taken by `using()` / `@DistributedLock` in this async context, innermost last. */
  readonly leases: readonly Lease[];
}

/** `rejectOnLoss` needs a wrapped call to reject: only `using()` and the decorator have one. */
function noWrappedCall(o: ResolvedLockOptions, where: string): ResolvedLockOptions {
  if (o.policy.rejectOnLoss) {
    throw new InvalidLockOptionsError('rejectOnLoss', 'applies to using() and @DistributedLock, which wrap a call', where);
  }
  return o;
}

const releaseKey = (backend: string, key: string): string => `${backend}\u0000${key}`;

/** One acquisition's options, and optionally who asks (a decorated method), for messages. */
type TakeOptions = ResolvedLockOptions & { where?: string };

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';

/**
 * A fresh id per acquisition: ownership must never be shared by a whole process. randomUUID draws
 * from a pooled entropy buffer (122 random bits); randomBytes(16) cost ~15 µs a call under load.
 */
const newOwnerId = (): string => randomUUID();

/**
 * The lock engine: owner ids, validity on the monotonic clock, waiting policy, reentrancy,
 * release on shutdown. Backends only supply the server-side primitives.
 */
@Injectable()
export class DistributedLockService
  implements LeaseObserver, DecoratedCallRunner, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown
{
  /** Lifecycle events: acquired, busy, released, release-failed, lost. */
  readonly events = new LockEvents();
  private readonly logger = new Logger(LOGGER_CONTEXT);
  private readonly context = new AsyncLocalStorage<LockContext>();
  /** Every lease this service granted and has not yet seen end, by owner id. */
  private readonly held = new Map<string, LeaseCore>();
  private shuttingDown = false;
  /** Aborts when shutdown begins: every call still waiting for a lock stops waiting. */
  private readonly stopping = new AbortController();
  /** @internal Whether this service's application has begun to shut down. */
  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Leases shut down with work still running under them: their keys go when it settles. */
  private readonly draining: Array<Promise<void>> = [];
  /** Releases in flight, by backend and key (see take()). */
  private readonly releasingKeys = new Map<string, Promise<void>>();
  /** Detach this engine's loss listeners from the backends when the application closes. */
  private readonly lossListenerRemovals: Array<() => void> = [];

  constructor(
    @Inject(RESOLVED_LOCK_OPTIONS) private readonly options: ResolvedModuleOptions,
    @Inject(LOCK_BACKENDS) private readonly backends: ReadonlyMap<string, LockBackend>,
  ) {
    // Every waiting call listens on it for as long as it waits: no limit, nothing is leaked.
    setMaxListeners(0, this.stopping.signal);
    // Until the application has bootstrapped, our own clients must not keep the process alive: a
    // failed onModuleInit elsewhere runs no shutdown hook, and the process would hang on them.
    for (const backend of this.ownBackends()) backend.holdProcess?.(false);
    for (const backend of backends.values()) {
      const remove = backend.onLeaseLost?.((owner, detail, reason) => this.held.get(owner)?.lose(reason ?? 'session-lost', detail));
      if (typeof remove === 'function') this.lossListenerRemovals.push(remove);
    }
  }

  /**
   * Acquire `key`, waiting up to `opts.wait` ms (module default 10 s) while another owner holds it.
   * @throws LockBusyError still held by another owner after waiting
   * @throws LockBackendUnavailableError the backend could not be reached in time
   * @throws InvalidLockOptionsError bad key or options (before any backend call)
   * @example
   * await using lease = await locks.acquire(`invoice:${id}`, { purpose: 'efficiency', ttl: 5000 });
   */
  async acquire(key: string, opts: LockOptions): Promise<Lease> {
    const where = `acquire(${JSON.stringify(key)})`;
    return (await this.take(noWrappedCall(resolveLockOptions(key, opts, this.options, where), where), true))!;
  }

  /** One attempt, no waiting: the lease, or `null` when another owner holds the key. */
  async tryAcquire(key: string, opts: Omit<LockOptions, 'wait'>): Promise<Lease | null> {
    const where = `tryAcquire(${JSON.stringify(key)})`;
    return this.take(noWrappedCall(resolveLockOptions(key, { ...opts, wait: 0 }, this.options, where), where), false);
  }

  /**
   * Run `fn` holding `key`, then release — also when `fn` throws. `fn` receives the lease, and
   * `current()` returns it anywhere below. A failed release is reported (logger, `release-failed`
   * event) and never replaces `fn`'s result or error.
   */
  async using<T>(key: string, opts: LockOptions, fn: (lease: Lease) => T | Promise<T>): Promise<T> {
    const o = resolveLockOptions(key, opts, this.options, `using(${JSON.stringify(key)})`);
    const lease = (await this.take(o, true))!;
    return this.runHolding(lease, () => fn(lease), o.policy.rejectOnLoss);
  }

  /**
   * The lease held by this async context (innermost first), or the one for `key`. Sees leases
   * taken by `using()` and `@DistributedLock`; `undefined` outside them.
   */
  current(key?: string): Lease | undefined {
    const leases = this.context.getStore()?.leases;
    if (!leases) return undefined;
    for (let i = leases.length - 1; i >= 0; i--) {
      if (key === undefined || leases[i].key === key) return leases[i];
    }
    return undefined;
  }

  /**
   * Every lease this async context holds, outermost first (nested `using()` / decorated calls).
   * Fencing helpers use it to find the lease that protects a resource.
   */
  currentLeases(): readonly Lease[] {
    return this.context.getStore()?.leases ?? [];
  }

  /**
   * Run `fn` inside `lease`'s async context and release the lease afterwards without letting a
   * release failure mask `fn`'s outcome. Used by `using()` and the decorator.
   * @internal
   */
  async runHolding<T>(lease: Lease, fn: () => T | Promise<T>, rejectOnLoss = false): Promise<T> {
    try {
      // Lost between the grant and now (shutdown began, it ran out), or a lease it is nested in
      // was lost while it waited: the work must not start.
      this.assertHeldAround(lease);
      const running = this.runInLease(lease, fn);
      return await (rejectOnLoss ? untilLost(lease, running) : running);
    } finally {
      await this.releaseQuietly(lease);
    }
  }

  /**
   * Throw the loss of `lease`, or of any lease this context is nested in, if one is known lost.
   * @internal
   */
  assertHeldAround(lease: Lease): void {
    if (lease.signal.aborted) throw lease.signal.reason;
    for (const outer of this.context.getStore()?.leases ?? []) if (outer.signal.aborted) throw outer.signal.reason;
  }

  /**
   * Run `fn` with `lease` as the current lease of its async context, without releasing it.
   * @internal
   */
  runInLease<T>(lease: Lease, fn: () => T): T {
    const parent = this.context.getStore()?.leases ?? [];
    const result = this.context.run({ leases: [...parent, lease] }, fn);
    // The work now running under the lease, which a shutdown waits for before it gives the key
    // back: until its Promise settles — or, an Observable, a Subscription, a plain value, until
    // the wrapper releases the handle (an Observable's subscription ends with that release).
    lease.leaseCore.trackWork(isPromiseLike(result) ? Promise.resolve(result) : lease.whenReleased());
    return result;
  }

  /**
   * The decorator's acquisition: `onBusy` decides between waiting, throwing and skipping (null).
   * @internal
   */
  acquireForMethod(lock: ResolvedMethodLock, key: string, signal?: AbortSignal): Promise<Lease | null> {
    const wait = lock.onBusy === 'wait' ? lock.wait : 0;
    return this.take({ key, purpose: lock.purpose, ttl: lock.ttl, wait, backend: lock.backend, policy: lock.policy, signal, where: lock.where }, lock.onBusy !== 'skip');
  }

  /** @internal */
  skipped(lock: ResolvedMethodLock, key: string): void {
    this.logger.debug(`Skipped ${lock.where}: lock "${key}" (${lock.purpose}) is held by another owner`);
  }

  /** Release and report instead of throwing: the caller's own result or error comes first. */
  async releaseQuietly(lease: Lease): Promise<void> {
    try {
      await lease.release();
    } catch (error) {
      this.reportReleaseFailure(lease, error);
    }
  }

  private async take(o: TakeOptions, throwWhenBusy: boolean): Promise<Lease | null> {
    o.signal?.throwIfAborted();
    // Synchronous unless the outer lease must be raised first: a call that does not re-enter goes
    // on at once (an acquisition started just before a release of the key must queue before it).
    const reentered = this.reenter(o);
    if (reentered) return reentered;
    const backend = this.backends.get(o.backend)!;
    if (this.shuttingDown) throw this.shutdownError(o);
    // Waiting stops at the caller's signal, when shutdown begins, or when a lease this call is
    // nested in is lost (its work is unprotected now) — whichever comes first.
    const enclosing = this.context.getStore()?.leases ?? [];
    const waiting = linkSignals([o.signal, this.stopping.signal, ...enclosing.map((lease) => lease.signal)]);
    // A release of this key by this process still in flight (a re-subscription, a loop) goes
    // first: otherwise our own lock would look busy to us.
    const pending = this.releasingKeys.get(releaseKey(o.backend, o.key));
    if (pending) await pending;
    let owner = newOwnerId();
    const started = monotonicNow();
    const deadline = started + o.wait;
    const queue = o.wait > 0;
    let queued = false;
    let lateAnswers = 0;
    let holderRemainingMs: number | undefined;
    try {
      for (;;) {
        const sentAt = monotonicNow();
        // The server keeps the key for ttl + lockDelay; we trust it for ttl (minus drift).
        const attempt = backend.acquire({ key: o.key, owner, ttlMs: o.ttl + o.policy.lockDelay, validityMs: o.ttl, queue, reportHolder: throwWhenBusy });
        // A caller's signal stops the wait for the answer too; whatever the answer turns out to be
        // (a grant, a queue place) is given back, owner-checked, when it comes.
        const attemptOwner = owner;
        const result = o.signal || enclosing.length > 0
          ? await unlessAborted(attempt, waiting.signal, () => void backend.release(o.key, attemptOwner).catch(() => undefined))
          : await attempt;
        if (result.acquired) {
          if (this.shuttingDown) {
            // Shutdown began while we asked: no work may start now. Give the key straight back.
            await backend.release(o.key, owner).catch(() => undefined);
            queued = false;
            throw this.shutdownError(o);
          }
          const p = result.provisional;
          const until = p
            ? validUntil(p.validFrom, Math.min(p.validForMs, o.ttl), this.options.driftFactor)
            : validUntil(sentAt, o.ttl, this.options.driftFactor);
          if (until > monotonicNow()) {
            const lease = this.grant(o, backend, owner, result.token, until, sentAt - started);
            if (p) lease.leaseCore.confirmWith(p.confirmed);
            return lease;
          }
          // The answer came after the lease would already have ended: it cannot be trusted. Give
          // it up, and retry as a NEW owner: a clean-up of the old attempt still in flight (a
          // timed-out delete a backend retries later) must never remove the retry's key.
          await backend.release(o.key, owner).catch(() => undefined);
          owner = newOwnerId();
          queued = false;
          // A backend slower than the ttl is not hammered: back off, 10 ms doubling to 1 s.
          const pause = Math.min(1_000, 10 * 2 ** lateAnswers++);
          if (monotonicNow() + pause >= deadline) {
            throw new LockBackendUnavailableError(o.backend, 'acquire', `the answer took longer than the ${o.ttl} ms ttl`, { key: o.key });
          }
          await sleepUnlessAborted(pause, waiting.signal);
          continue;
        }
        queued ||= queue;
        holderRemainingMs = result.holderRemainingMs;
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) break;
        await backend.waitForTurn(o.key, owner, remaining, waiting.signal);
      }
    } catch (error) {
      if (queued) await backend.release(o.key, owner).catch(() => undefined);
      if (this.stopping.signal.aborted && error === this.stopping.signal.reason) throw this.shutdownError(o);
      throw error;
    } finally {
      waiting.dispose();
    }
    if (queued) await backend.release(o.key, owner).catch(() => undefined);
    const waitedMs = monotonicNow() - started;
    this.events.emit('busy', { key: o.key, purpose: o.purpose, backend: o.backend, waitedMs });
    if (!throwWhenBusy) return null;
    throw new LockBusyError(o.key, o.purpose, o.backend, queue ? waitedMs : 0, holderRemainingMs);
  }

  private shutdownError(o: ResolvedLockOptions): LockBackendUnavailableError {
    return new LockBackendUnavailableError(o.backend, 'acquire', 'the application is shutting down', { key: o.key });
  }

  private grant(o: ResolvedLockOptions, backend: LockBackend, owner: string, token: bigint | undefined, until: number, waitedMs: number): Lease {
    const core = new LeaseCore({
      key: o.key,
      purpose: o.purpose,
      token,
      backend,
      backendName: o.backend,
      owner,
      ttlMs: o.ttl,
      validUntilMs: until,
      driftFactor: this.options.driftFactor,
      policy: o.policy,
      observer: this,
    });
    this.held.set(owner, core);
    if (this.events.listenerCount('acquired') > 0) {
      this.events.emit('acquired', { key: o.key, purpose: o.purpose, backend: o.backend, token, waitedMs, reentrant: false });
    }
    return new Lease(core, true, (lease, error) => this.reportReleaseFailure(lease, error));
  }

  /**
   * Acquiring a key this async context already holds (same backend) returns a reentrant handle on
   * that lease — with the settings the nested call asks for: a longer ttl or lockDelay, a watchdog
   * (or a longer maxHold), a longer lockAtLeastFor raise the lease to them before the nested work
   * starts (never lower it; see LeaseCore.raise). A lease found lost meanwhile rejects the call.
   */
  private reenter(o: TakeOptions): Lease | Promise<Lease> | undefined {
    const outer = this.context.getStore()?.leases.findLast(
      (lease) => lease.key === o.key && lease.backend === o.backend && lease.held && !lease.signal.aborted,
    );
    if (!outer) return undefined;
    if (outer.purpose !== o.purpose) {
      // One backend serves both purposes: inheriting would hand a '${o.purpose}' caller a lease
      // taken for another purpose, and a fresh acquisition would wait on this very context.
      throw new InvalidLockOptionsError(
        'purpose',
        `this async context already holds "${o.key}" for '${outer.purpose}' on backend "${o.backend}"; ` +
          `a nested '${o.purpose}' acquisition of the same key would wait on itself — use one purpose per key`,
        o.where ?? `acquire(${JSON.stringify(o.key)})`,
      );
    }
    const handle = (): Lease => {
      this.events.emit('acquired', { key: o.key, purpose: o.purpose, backend: o.backend, token: outer.token, waitedMs: 0, reentrant: true });
      return new Lease(outer.leaseCore, false, (lease, error) => this.reportReleaseFailure(lease, error));
    };
    const raising = outer.leaseCore.raise(o.ttl, o.policy);
    return raising ? raising.then(handle) : handle();
  }

  private reportReleaseFailure(lease: Lease, error: unknown): void {
    this.logger.warn(`Release of "${lease.key}" (${lease.purpose}, ${lease.backend}) failed; it expires by itself: ${(error as Error)?.message ?? error}`);
    this.events.emit('release-failed', { key: lease.key, purpose: lease.purpose, backend: lease.backend, error });
  }

  /** @internal LeaseObserver */
  lost(core: LeaseCore, error: LeaseLostError): void {
    if (error.reason !== 'shutdown') {
      this.logger.warn(`Lease on "${core.key}" (${core.purpose}, ${core.backendName}) lost: ${error.message}`);
    }
    this.events.emit('lost', { key: core.key, purpose: core.purpose, backend: core.backendName, error });
  }

  /** @internal LeaseObserver */
  released(core: LeaseCore, wasOwner: boolean): void {
    if (this.events.listenerCount('released') === 0) return;
    this.events.emit('released', {
      key: core.key,
      purpose: core.purpose,
      backend: core.backendName,
      heldMs: monotonicNow() - core.acquiredAt,
      wasOwner,
    });
  }

  /** @internal LeaseObserver */
  renewed(core: LeaseCore): void {
    this.events.emit('renewed', { key: core.key, purpose: core.purpose, backend: core.backendName, remainingMs: core.remainingMs() });
  }

  /** @internal LeaseObserver */
  renewalFailed(core: LeaseCore, error: unknown): void {
    this.logger.warn(
      `Renewal of "${core.key}" (${core.purpose}, ${core.backendName}) failed; ${Math.round(core.remainingMs())} ms of validity left: ${(error as Error)?.message ?? error}`,
    );
    this.events.emit('renewal-failed', { key: core.key, purpose: core.purpose, backend: core.backendName, error });
  }

  /** @internal LeaseObserver */
  releasing(core: LeaseCore, done: Promise<void>): void {
    const k = releaseKey(core.backendName, core.key);
    const settled = done.then(
      () => undefined,
      () => undefined,
    );
    this.releasingKeys.set(k, settled);
    void settled.then(() => {
      if (this.releasingKeys.get(k) === settled) this.releasingKeys.delete(k);
    });
  }

  /** @internal LeaseObserver */
  workOutlivedShutdown(core: LeaseCore): void {
    this.logger.warn(
      `Work under "${core.key}" (${core.purpose}, ${core.backendName}) was still running when its lease's validity ran out ` +
        'during shutdown; the key was given up (another owner may take it now)',
    );
  }

  /** @internal LeaseObserver */
  ended(core: LeaseCore): void {
    this.held.delete(core.owner);
  }

  onApplicationBootstrap(): void {
    for (const backend of this.ownBackends()) backend.holdProcess?.(true);
  }

  /** The backends this module built (not those the application passed in `backends`). */
  private ownBackends(): LockBackend[] {
    const userProvided = new Set(Object.keys(this.options.backends));
    return [...this.backends.entries()].filter(([name]) => !userProvided.has(name)).map(([, backend]) => backend);
  }

  /**
   * Release every lease still held, so a clean stop leaves no key behind. Every lease's signal
   * aborts at once (the work is told to stop), but a lease with work still running under it — a
   * `using()` body, a decorated call — keeps its key until that work has settled or the lease's
   * validity has run out: a replica started meanwhile must not run the same job beside it. This
   * hook does not wait for that work (other providers' shutdown hooks may be what stops it, and
   * the HTTP server's in-flight requests finish after it); onApplicationShutdown does, before it
   * closes the clients.
   */
  async beforeApplicationShutdown(): Promise<void> {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    // Waiting calls reject now (before any release below could hand a key to one of them).
    this.stopping.abort(new Error('the application is shutting down'));
    // From here on nothing of ours may keep the process alive beyond its own timeouts.
    for (const backend of this.ownBackends()) backend.holdProcess?.(false);
    const cores = [...this.held.values()];
    const working = cores.filter((core) => core.state === 'held' && core.working);
    if (working.length > 0) {
      const longest = Math.max(...working.map((core) => core.remainingMs()));
      this.logger.log(
        `Shutdown waits for the work still running under ${working.length} lease(s) before giving their keys back ` +
          `(at most ${Math.ceil(longest)} ms, what is left of their validity)`,
      );
    }
    const released = cores.map((core) => {
      const draining = core.state === 'held' && core.working;
      const done = core.shutDown().catch((error: unknown) => {
        this.logger.warn(`Release of "${core.key}" at shutdown failed; it expires by itself: ${(error as Error)?.message ?? error}`);
      });
      if (draining) this.draining.push(done);
      return draining ? undefined : done;
    });
    await Promise.all(released);
  }

  /**
   * Close the clients this module opened (never the application's own) — once the work still
   * running under a lease at shutdown has settled and its key is given back (bounded by validity).
   */
  async onApplicationShutdown(): Promise<void> {
    if (!this.shuttingDown) await this.beforeApplicationShutdown();
    await Promise.all(this.draining.splice(0));
    for (const remove of this.lossListenerRemovals.splice(0)) remove();
    // Backends passed in `backends` belong to the application, like a client it passes in.
    await Promise.all(this.ownBackends().map((backend) => backend.close().catch(() => undefined)));
  }
}
