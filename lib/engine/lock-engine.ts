import { Inject, Injectable, Logger, type BeforeApplicationShutdown, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { setMaxListeners } from 'node:events';
import { LOGGER_CONTEXT } from '../distributed-lock.constants.js';
import { LOCK_BACKENDS, type LockBackend } from '../backends/lock-backend.interface.js';
import { Acquisition } from './acquisition.js';
import { InFlight } from './in-flight.js';
import type { Lease } from './lease.js';
import { LockAdmin } from './lock-admin.js';
import { LeaseContext } from './lease-context.js';
import { LeaseGrants } from './lease-grants.js';
import { LeaseRegistry } from './lease-registry.js';
import { LockEvents } from './lock-events.js';
import { SKIPPED, type LockRequest, type WhenBusy } from './lock-request.js';
import { untilLost } from './until-lost.util.js';

/** Injection token of the engine's settings (`LockEngineConfig`). */
export const LOCK_ENGINE_CONFIG = Symbol('LOCK_ENGINE_CONFIG');

export interface LockEngineConfig {
  /** Clock drift allowance per ms of ttl (see common/validity.util.ts). */
  driftFactor: number;
  /** Backends the application passed in (`backends: {…}`): the engine never closes them. */
  appBackends: readonly string[];
}

/**
 * The lock engine: the entry points (`acquire()`, `runLocked()`) and the application's lifecycle —
 * our clients not holding the process before bootstrap, every lease given back at shutdown, the
 * clients closed once nothing is in flight. The acquisition loop is in acquisition.ts, reentrancy
 * in reentrancy.ts, a lease's own life in lease-core.ts; backends supply only the server-side
 * primitives.
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
  /** Attempts still unanswered, calls waiting in a queue, give-backs: close() waits for them. */
  private readonly inFlight = new InFlight();
  /** Detach this engine's loss listeners from the backends when the application closes. */
  private readonly lossListenerRemovals: Array<() => void> = [];
  private readonly grants: LeaseGrants;
  private readonly acquisition: Acquisition;

  constructor(
    @Inject(LOCK_BACKENDS) private readonly backends: ReadonlyMap<string, LockBackend>,
    @Inject(LOCK_ENGINE_CONFIG) private readonly config: LockEngineConfig,
  ) {
    this.admin = new LockAdmin(backends, this.registry, this.events);
    this.grants = new LeaseGrants(this.registry, this.events, config.driftFactor);
    this.acquisition = new Acquisition({
      backends,
      context: this.context,
      registry: this.registry,
      events: this.events,
      grants: this.grants,
      inFlight: this.inFlight,
      stopping: this.stopping.signal,
      shuttingDown: () => this.shuttingDown,
      driftFactor: config.driftFactor,
    });
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

  /**
   * What the engine keeps per lease and per call — held leases, their owners, releases and
   * acquisitions in flight — by record name (see LockBackend.bookkeeping): back to empty once
   * every lease has ended. For tests and diagnostics (the randomized simulation's leak walk).
   */
  bookkeeping(): Record<string, string[]> {
    const inFlight = Array.from({ length: this.inFlight.size }, (_, i) => `call #${i + 1}`);
    return { ...this.registry.bookkeeping(), inFlight };
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
    return this.acquisition.take(request, whenBusy === 'throw');
  }

  /**
   * Acquire, run `fn` inside the lease's async context, release when its Promise settles — also
   * when it throws. A release failure is reported and never replaces `fn`'s outcome. With
   * `policy.rejectOnLoss`, rejects with the `LeaseLostError` the moment the lease is lost. Busy:
   * `SKIPPED` (`whenBusy: 'skip'`, `fn` not run) or `LockBusyError`.
   */
  async runLocked<T>(request: LockRequest, whenBusy: WhenBusy, fn: (lease: Lease) => T | Promise<T>): Promise<T | typeof SKIPPED> {
    const lease = await this.acquisition.take(request, whenBusy === 'throw');
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
      this.grants.reportReleaseFailure(lease, error);
    }
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
    await this.inFlight.settle();
    for (const remove of this.lossListenerRemovals.splice(0)) remove();
    // Backends passed in `backends` belong to the application, like a client it passes in.
    await Promise.all(this.ownBackends().map((backend) => backend.close().catch(() => undefined)));
  }
}
