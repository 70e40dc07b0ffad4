// Over 250 lines on purpose: the acquisition loop, the grant, reentrancy and the shutdown order
// share the engine's state (held leases, the stopping signal, the shutting-down flag) and read
// best in one place. What a lease's life reports is in lease-registry.ts, the async context in
// lease-context.ts.
import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { setMaxListeners } from 'node:events';
import { randomBytes } from 'node:crypto';
import { monotonicNow, validUntil } from '../common/validity.util.js';
import { LOGGER_CONTEXT } from '../distributed-lock.constants.js';
import { LOCK_BACKENDS, type LockBackend } from '../backends/lock-backend.interface.js';
import { MultiKeyBackend } from '../backends/multi-key.backend.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { LockBusyError } from '../errors/lock-busy.error.js';
import { LEASE_INTERNALS, type Lease } from './lease.js';
import { LockAdmin } from './lock-admin.js';
import { LeaseContext } from './lease-context.js';
import { LeaseCore } from './lease-core.js';
import { LeaseRegistry } from './lease-registry.js';
import { LockEvents } from './lock-events.js';
import { kindOf, SKIPPED, type LockRequest, type WhenBusy } from './lock-request.js';
import { linkSignals, sleepUnlessAborted, unlessAborted } from './signals.util.js';
import { untilLost } from './until-lost.util.js';

/** Injection token of the engine's settings (`LockEngineConfig`). */
export const LOCK_ENGINE_CONFIG = Symbol('LOCK_ENGINE_CONFIG');

export interface LockEngineConfig {
  /** Clock drift allowance per ms of ttl (see common/validity.util.ts). */
  driftFactor: number;
  /** Backends the application passed in (`backends: {…}`): the engine never closes them. */
  appBackends: readonly string[];
}

/** The longest delay a Node timer takes (longer ones fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** 128 random bits, drawn once per process: no two processes share it. */
const OWNER_PREFIX = randomBytes(16).toString('base64url');
let ownerCount = 0;

/**
 * A fresh id per acquisition: ownership must never be shared by a whole process. The process's
 * random prefix and a counter: unique like a UUID per acquisition, at a fraction of the cost
 * (randomUUID, and randomBytes per call before it, showed in every profile) and 10 bytes shorter
 * on the wire.
 */
const newOwnerId = (): string => OWNER_PREFIX + (ownerCount++).toString(36);

/**
 * The lock engine: owner ids, validity on the monotonic clock, waiting, grants, reentrancy, the
 * async context of held leases, release on shutdown. Backends supply only the server-side
 * primitives; the service and the decorator come in through `acquire()` and `runLocked()`.
 */
@Injectable()
export class LockEngine implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  /** Lifecycle events: acquired, busy, released, release-failed, lost, renewed, renewal-failed. */
  readonly events = new LockEvents();
  readonly context = new LeaseContext();
  private readonly logger = new Logger(LOGGER_CONTEXT);
  private readonly registry = new LeaseRegistry(this.events, this.logger);
  /** inspect() and forceRelease(): an operator's view of any holder's key. */
  readonly admin: LockAdmin;
  private shuttingDown = false;
  /** Aborts when shutdown begins: every call still waiting for a lock stops waiting. */
  private readonly stopping = new AbortController();
  /** Leases shut down with work still running under them: their keys go when it settles. */
  private readonly draining: Array<Promise<void>> = [];
  /**
   * Acquire attempts still unanswered, and the give-backs of grants that came during shutdown:
   * the backends close only once they have settled (each is bounded by its backend's timeouts),
   * or a grant answered after `close()` would hold its key for the whole ttl.
   */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Detach this engine's loss listeners from the backends when the application closes. */
  private readonly lossListenerRemovals: Array<() => void> = [];
  private readonly reportReleaseFailure = (lease: Lease, error: unknown): void => this.registry.releaseFailed(lease, error);

  constructor(
    @Inject(LOCK_BACKENDS) private readonly backends: ReadonlyMap<string, LockBackend>,
    @Inject(LOCK_ENGINE_CONFIG) private readonly config: LockEngineConfig,
  ) {
    this.admin = new LockAdmin(backends, this.registry, this.events);
    // Every waiting call listens on it for as long as it waits: no limit, nothing is leaked.
    setMaxListeners(0, this.stopping.signal);
    // Until the application has bootstrapped, our own clients must not keep the process alive: a
    // failed onModuleInit elsewhere runs no shutdown hook, and the process would hang on them.
    for (const backend of this.ownBackends()) backend.holdProcess?.(false);
    for (const backend of backends.values()) {
      const remove = backend.onLeaseLost?.((owner, detail, reason) => this.registry.lose(owner, reason ?? 'session-lost', detail));
      if (typeof remove === 'function') this.lossListenerRemovals.push(remove);
    }
  }

  /** Whether this engine's application has begun to shut down. */
  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /**
   * Acquire: the lease, or — the key still held by another owner when the wait is over — `null`
   * (`whenBusy: 'skip'`) or `LockBusyError` (`'throw'`).
   */
  acquire(request: LockRequest, whenBusy: WhenBusy): Promise<Lease | null> {
    return this.take(request, whenBusy === 'throw');
  }

  /**
   * Acquire, run `fn` inside the lease's async context, release when its Promise settles — also
   * when it throws. A release failure is reported and never replaces `fn`'s outcome. With
   * `policy.rejectOnLoss`, rejects with the `LeaseLostError` the moment the lease is lost. Busy:
   * `SKIPPED` (`whenBusy: 'skip'`, `fn` not run) or `LockBusyError`.
   */
  async runLocked<T>(request: LockRequest, whenBusy: WhenBusy, fn: (lease: Lease) => T | Promise<T>): Promise<T | typeof SKIPPED> {
    const lease = await this.take(request, whenBusy === 'throw');
    if (!lease) {
      this.logger.debug(`Skipped ${request.where ?? 'a call'}: lock "${request.key}" (${request.purpose}) is held by another owner`);
      return SKIPPED;
    }
    try {
      // Lost between the grant and now (shutdown began, it ran out), or a lease it is nested in
      // was lost while it waited: the work must not start.
      this.context.assertHeldAround(lease);
      const running = this.context.run(lease, () => fn(lease));
      return await (request.policy.rejectOnLoss ? untilLost(lease, running) : running);
    } finally {
      await this.releaseQuietly(lease);
    }
  }

  /** Release and report instead of throwing: the caller's own result or error comes first. */
  private async releaseQuietly(lease: Lease): Promise<void> {
    try {
      await lease.release();
    } catch (error) {
      this.reportReleaseFailure(lease, error);
    }
  }

  private async take(o: LockRequest, throwWhenBusy: boolean): Promise<Lease | null> {
    o.signal?.throwIfAborted();
    // Synchronous unless the outer lease must be raised first: a call that does not re-enter goes
    // on at once (an acquisition started just before a release of the key must queue before it).
    const reentered = this.reenter(o);
    if (reentered) return reentered;
    const backend = this.backendFor(o);
    if (this.shuttingDown) throw this.shutdownError(o);
    // Waiting stops at the caller's signal, when shutdown begins, or when a lease this call is
    // nested in is lost (its work is unprotected now) — whichever comes first.
    const enclosing = this.context.leases();
    const waiting = linkSignals([o.signal, this.stopping.signal, ...enclosing.map((lease) => lease.signal)]);
    // A release of this key by this process still in flight (a re-subscription, a loop) goes
    // first: otherwise our own lock would look busy to us.
    if (o.keys) {
      for (const key of o.keys) {
        const pending = this.registry.pendingRelease(o.backend, key);
        if (pending) await pending;
      }
    } else {
      const pending = this.registry.pendingRelease(o.backend, o.key);
      if (pending) await pending;
    }
    let owner = newOwnerId();
    // A loss the backend reports for this owner before the grant is known here (a force-release
    // whose notice overtakes the answer; a key of a multi-key attempt lost while it takes the
    // others) is kept for the grant, not dropped for want of a lease.
    let attempt = this.registry.attempting(owner);
    const started = monotonicNow();
    const deadline = started + o.wait;
    const queue = o.wait > 0;
    let queued = false;
    let lateAnswers = 0;
    let holderRemainingMs: number | undefined;
    // While it waits in a queue, this call is work close() waits for: its give-back of the queue
    // place (and of a multi-key attempt's keys taken so far) must reach the server before the
    // clients close, or those keys stay held for their whole ttl.
    let waited: (() => void) | undefined;
    /** Give back what `owner` may hold or queue for (owner-checked), as work close() waits for. */
    const giveBack = (): Promise<unknown> => this.tracked(backend.release(o.key, owner).catch(() => undefined));
    /** Start over as a new owner: a clean-up of the old one still in flight never touches the new one's keys. */
    const renew = (): void => {
      this.registry.attempted(owner);
      owner = newOwnerId();
      attempt = this.registry.attempting(owner);
      queued = false;
    };
    try {
      for (;;) {
        if (attempt.lost) {
          // A key this attempt had taken was lost while it waited for another: start over.
          await giveBack();
          renew();
        }
        const sentAt = monotonicNow();
        // The server keeps the key for ttl + lockDelay; we trust it for ttl (minus drift).
        const answer = this.tracked(backend.acquire({ key: o.key, owner, ttlMs: o.ttl + o.policy.lockDelay, validityMs: o.ttl, queue, reportHolder: throwWhenBusy }));
        // A caller's signal stops the wait for the answer too; whatever the answer turns out to be
        // (a grant, a queue place) is given back, owner-checked, when it comes.
        const attemptOwner = owner;
        const result = o.signal || enclosing.length > 0
          ? await unlessAborted(answer, waiting.signal, () => void this.tracked(backend.release(o.key, attemptOwner).catch(() => undefined)))
          : await answer;
        if (result.acquired) {
          if (this.shuttingDown) {
            // Shutdown began while we asked: no work may start now. Give the key straight back.
            await giveBack();
            queued = false;
            throw this.shutdownError(o);
          }
          if (attempt.lost) {
            // Granted, but the backend said meanwhile that a key of it is gone: not a lease.
            await giveBack();
            renew();
            if (monotonicNow() >= deadline) break;
            continue;
          }
          const p = result.provisional;
          const until = p
            ? validUntil(p.validFrom, Math.min(p.validForMs, o.ttl), this.config.driftFactor)
            : validUntil(sentAt, o.ttl, this.config.driftFactor);
          if (until > monotonicNow()) {
            const lease = this.grant(o, backend, owner, result.token, until, sentAt - started);
            if (p?.confirmed) LEASE_INTERNALS.core(lease).confirmWith(p.confirmed);
            return lease;
          }
          // The answer came after the lease would already have ended: it cannot be trusted. Give
          // it up, and retry as a NEW owner.
          await giveBack();
          renew();
          // A backend slower than the ttl is not hammered: back off, 10 ms doubling to 1 s.
          const pause = Math.min(1_000, 10 * 2 ** lateAnswers++);
          if (monotonicNow() + pause >= deadline) {
            throw new LockBackendUnavailableError(o.backend, 'acquire', `the answer took longer than the ${o.ttl} ms ttl`, { key: o.key });
          }
          await sleepUnlessAborted(pause, waiting.signal);
          continue;
        }
        if (queue && !waited) waited = this.waiting();
        queued ||= queue;
        holderRemainingMs = result.holderRemainingMs;
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) break;
        // Stopped meanwhile (shutdown, the caller's signal): no wait that a backend might not cut short.
        waiting.signal.throwIfAborted();
        // A campaign waits without end: one timer's longest span at a time.
        await backend.waitForTurn(o.key, owner, Math.min(remaining, MAX_TIMER_MS), waiting.signal);
      }
      if (queued) await giveBack();
    } catch (error) {
      if (queued) await giveBack();
      if (this.stopping.signal.aborted && error === this.stopping.signal.reason) throw this.shutdownError(o);
      throw error;
    } finally {
      waiting.dispose();
      this.registry.attempted(owner);
      waited?.();
    }
    const waitedMs = monotonicNow() - started;
    this.events.emit('busy', { key: o.key, purpose: o.purpose, backend: o.backend, kind: kindOf(o), waitedMs });
    if (!throwWhenBusy) return null;
    throw new LockBusyError(o.key, o.purpose, o.backend, queue ? waitedMs : 0, holderRemainingMs);
  }

  /** Work close() waits for until the returned function is called (see `inFlight`). */
  private waiting(): () => void {
    let done!: () => void;
    void this.tracked(new Promise<void>((resolve) => (done = resolve)));
    return done;
  }

  /**
   * The backend of a request: its semaphore view when it asks for more than one permit; for
   * several keys, a MultiKeyBackend of its own (all or nothing, taken in sorted order).
   */
  private backendFor(o: LockRequest): LockBackend {
    const backend = this.backends.get(o.backend)!;
    if (o.keys) return new MultiKeyBackend(backend, o.keys);
    return o.permits > 1 ? backend.semaphore!(o.permits) : backend;
  }

  /** `promise`, remembered until it settles (see `inFlight`). */
  private tracked<T>(promise: Promise<T>): Promise<T> {
    this.inFlight.add(promise);
    const forget = (): void => void this.inFlight.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  private shutdownError(o: LockRequest): LockBackendUnavailableError {
    return new LockBackendUnavailableError(o.backend, 'acquire', 'the application is shutting down', { key: o.key });
  }

  private grant(o: LockRequest, backend: LockBackend, owner: string, token: bigint | undefined, until: number, waitedMs: number): Lease {
    const core = new LeaseCore({
      key: o.key,
      keys: o.keys,
      purpose: o.purpose,
      token,
      backend,
      backendName: o.backend,
      permits: o.permits,
      kind: kindOf(o),
      owner,
      ttlMs: o.ttl,
      validUntilMs: until,
      driftFactor: this.config.driftFactor,
      policy: o.policy,
      observer: this.registry,
    });
    this.registry.add(core);
    if (this.events.listenerCount('acquired') > 0) {
      this.events.emit('acquired', { key: o.key, purpose: o.purpose, backend: o.backend, kind: core.kind, token, waitedMs, reentrant: false });
    }
    return LEASE_INTERNALS.create(core, true, this.reportReleaseFailure);
  }

  /**
   * Acquiring a key this async context already holds (same backend) returns a reentrant handle on
   * that lease — with the settings the nested call asks for: a longer ttl or lockDelay, a watchdog
   * (or a longer maxHold), a longer lockAtLeastFor raise the lease to them before the nested work
   * starts (never lower it; see LeaseCore.raise). A lease found lost meanwhile rejects the call.
   */
  private reenter(o: LockRequest): Lease | Promise<Lease> | undefined {
    const outer = o.keys ? this.context.covering(o.keys, o.backend) : this.context.reentrant(o.key, o.backend);
    if (!outer) {
      const own = o.keys?.find((key) => this.context.reentrant(key, o.backend));
      if (own !== undefined) {
        // Taking the rest while this context holds some would wait on itself (until its wait ran out).
        throw new InvalidLockOptionsError(
          'key',
          `this async context already holds "${own}" on backend "${o.backend}" but not all of ${JSON.stringify(o.keys)}: ` +
            'take every key in the outer acquisition, or none of them',
          o.where ?? `acquire(${JSON.stringify(o.keys)})`,
        );
      }
      return undefined;
    }
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
    if (LEASE_INTERNALS.core(outer).permits !== o.permits) {
      throw new InvalidLockOptionsError(
        'permits',
        `this async context already holds "${o.key}" with permits ${LEASE_INTERNALS.core(outer).permits}; a nested acquisition asks for ${o.permits}`,
        o.where ?? `acquire(${JSON.stringify(o.key)})`,
      );
    }
    const handle = (): Lease => {
      this.events.emit('acquired', { key: o.key, purpose: o.purpose, backend: o.backend, kind: LEASE_INTERNALS.core(outer).kind, token: outer.token, waitedMs: 0, reentrant: true });
      return LEASE_INTERNALS.create(LEASE_INTERNALS.core(outer), false, this.reportReleaseFailure);
    };
    const raising = LEASE_INTERNALS.core(outer).raise(o.ttl, o.policy);
    return raising ? raising.then(handle) : handle();
  }

  onApplicationBootstrap(): void {
    for (const backend of this.ownBackends()) backend.holdProcess?.(true);
  }

  /** The backends this module built (not those the application passed in `backends`). */
  private ownBackends(): LockBackend[] {
    const appOwned = new Set(this.config.appBackends);
    return [...this.backends.entries()].filter(([name]) => !appOwned.has(name)).map(([, backend]) => backend);
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
    const cores = this.registry.all();
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
    // Attempts still unanswered, then the give-backs their answers start (bounded passes).
    for (let pass = 0; pass < 3 && this.inFlight.size > 0; pass++) await Promise.allSettled([...this.inFlight]);
    for (const remove of this.lossListenerRemovals.splice(0)) remove();
    // Backends passed in `backends` belong to the application, like a client it passes in.
    await Promise.all(this.ownBackends().map((backend) => backend.close().catch(() => undefined)));
  }
}
