// Over 250 lines on purpose (417, from 501 before the watchdog, the reentrant handles,
// lockAtLeastFor and the call order moved out): one state machine whose transitions share its
// validity and settings; see the class comment. Issue 34 takes it under 300.
import { LeaseLostError, type LeaseLossReason } from '../errors/lease-lost.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockBackend } from '../backends/lock-backend.interface.js';
import type { LeasePolicy } from './lease-policy.js';
import type { LockKind } from './lock-events.js';
import { DeadlineTimer } from '../common/deadline-timer.js';
import { LeaseWork } from './lease-work.js';
import { LeaseWatchdog } from './lease-watchdog.js';
import { LockAtLeast } from './lease-at-least.js';
import { OrderedCalls } from './ordered-calls.js';
import { ReentrantHandles } from './reentrant-handles.js';
import { monotonicNow, validUntil } from '../common/validity.util.js';

/** How a lease tells its engine what happened to it. */
export interface LeaseObserver {
  lost(core: LeaseCore, error: LeaseLostError): void;
  /** The lease is over (released or lost and cleaned up); forget it. */
  ended(core: LeaseCore): void;
  released(core: LeaseCore, wasOwner: boolean): void;
  renewed(core: LeaseCore): void;
  renewalFailed(core: LeaseCore, error: unknown): void;
  /** A release of the key went out (settles when the backend answered). */
  releasing?(core: LeaseCore, done: Promise<void>): void;
  /** Shut down with work still running under it, and that work outlived the lease's validity. */
  workOutlivedShutdown?(core: LeaseCore): void;
}

export type LeaseState = 'held' | 'released' | 'lost';

/**
 * The one real lease behind every `Lease` handle (reentrant handles share it): one state machine
 * (held → released | lost) whose transitions — expiry, loss, extend, reentrant raises, release
 * with lockAtLeastFor, shutdown with work running — read and write the same validity and
 * settings. Its parts with state of their own are apart: the watchdog (lease-watchdog.ts), the
 * reentrant handles (reentrant-handles.ts), the work under it (lease-work.ts), the order of its
 * calls (ordered-calls.ts), the deadline (common/deadline-timer.ts).
 *
 * Server-side, a key lives `ttl + lockDelay`; the holder trusts it for `ttl` minus drift. A
 * release deletes it at once (or after `lockAtLeastFor`); an involuntary loss leaves it for the
 * lock-delay, so the next holder cannot start while the lost one may still be acting.
 */
export interface LeaseCoreInit {
  key: string;
  /** A multi-key lease's keys, sorted (`key` is the first); absent for one key. */
  keys?: readonly string[];
  purpose: LockPurpose;
  token: bigint | undefined;
  backend: LockBackend;
  /** The name the module routes by (`backends: { name: … }`), which events and handles report. */
  backendName: string;
  /** 1 for a lock; the semaphore's permits otherwise (`backend` is then its semaphore view). */
  permits: number;
  kind: LockKind;
  owner: string;
  ttlMs: number;
  /** Monotonic time until which the grant may be trusted. */
  validUntilMs: number;
  driftFactor: number;
  policy: LeasePolicy;
  observer: LeaseObserver;
}

export class LeaseCore {
  /** Why the lease was lost (its signal's reason), once it is. */
  private lossError?: LeaseLostError;
  /**
   * Made on first read of the signal (most leases are never asked: an AbortController costs more
   * than the rest of a grant). Made after a loss, it is aborted already, with the same reason.
   */
  private abortController?: AbortController;
  readonly acquiredAt = monotonicNow();
  readonly key: string;
  /** Every key the lease holds, sorted (one for a plain lease). */
  readonly keys: readonly string[];
  readonly purpose: LockPurpose;
  readonly token: bigint | undefined;
  readonly backend: LockBackend;
  readonly backendName: string;
  readonly permits: number;
  readonly kind: LockKind;
  readonly owner: string;
  /** The options it was acquired with (a reentrant acquisition may raise the settings below). */
  readonly policy: LeasePolicy;
  state: LeaseState = 'held';
  /**
   * The lease's settings in force: those it was acquired with, raised — never lowered — by the
   * reentrant acquisitions nested in it (see raise()).
   */
  private ttl: number;
  private lockDelayMs: number;
  private readonly atLeast: LockAtLeast;
  private readonly watchdog: LeaseWatchdog;
  /** The work running under this lease: a shutdown keeps the key while any of it runs. */
  private work?: LeaseWork;
  /** Shut down while work still ran: the key goes when it has settled (or the validity ended). */
  private draining = false;
  private validUntilMs: number;
  readonly driftFactor: number;
  private readonly observer: LeaseObserver;
  private readonly expiry = new DeadlineTimer(() => this.lose('expired', `its ${this.ttlMs} ms ttl ran out`));
  private releasing?: Promise<void>;
  /** A claim, extends, renewals and the lockAtLeastFor extend: one at a time, in order. */
  private readonly calls = new OrderedCalls();
  private readonly handles = new ReentrantHandles(
    () => (this.state === 'held' ? undefined : this.endReason()),
    () => void this.release().catch(() => undefined),
  );

  constructor(init: LeaseCoreInit) {
    this.key = init.key;
    this.purpose = init.purpose;
    this.token = init.token;
    this.backend = init.backend;
    this.backendName = init.backendName;
    this.permits = init.permits;
    this.kind = init.kind;
    this.keys = init.keys ?? [init.key];
    this.owner = init.owner;
    this.ttl = init.ttlMs;
    this.validUntilMs = init.validUntilMs;
    this.driftFactor = init.driftFactor;
    this.policy = init.policy;
    this.observer = init.observer;
    this.lockDelayMs = init.policy.lockDelay;
    this.atLeast = new LockAtLeast(init.policy.lockAtLeastFor, this.acquiredAt);
    this.scheduleExpiry();
    const core = this;
    this.watchdog = new LeaseWatchdog(
      {
        get held() {
          return core.state === 'held';
        },
        get ttlMs() {
          return core.ttl;
        },
        get trustedUntil() {
          return core.validUntilMs;
        },
        driftFactor: init.driftFactor,
        extend: (ttl) => this.extend(ttl),
        renewed: () => this.observer.renewed(this),
        renewalFailed: (error) => this.observer.renewalFailed(this, error),
      },
      init.policy.watchdog?.maxHold,
      this.acquiredAt,
    );
  }

  /** The ttl in force (the acquisition's, or a longer one a reentrant acquisition asked for). */
  get ttlMs(): number {
    return this.ttl;
  }

  /**
   * A reentrant acquisition nested in this lease asks for `ttl` and `policy`: it gets them. Every
   * setting it asks for that is longer than this lease's is raised to it, counted from now — never
   * lowered: a longer ttl or lockDelay (one owner-checked extend, before the nested work starts),
   * the watchdog up to its maxHold, its lockAtLeastFor. Settings no longer than the lease's leave
   * it as it stands (the nested work shares it, like the outer work does: no round trip).
   * Returns the extend in flight, or undefined when no round trip was needed (all done already).
   * @throws LeaseLostError the lease is lost (the nested work must not start)
   * @throws LockBackendUnavailableError the extend could not reach the backend (rejects)
   */
  raise(ttl: number, policy: LeasePolicy): Promise<void> | undefined {
    this.assertHeld();
    if (ttl <= this.ttl && policy.lockDelay <= this.lockDelayMs) {
      this.raiseLocally(policy);
      return undefined;
    }
    return (async () => {
      const newTtl = Math.max(ttl, this.ttl);
      const newDelay = Math.max(policy.lockDelay, this.lockDelayMs);
      // Never shorter than the validity the lease already has (an extend() may have set more).
      const keep = Math.ceil((this.validUntilMs - monotonicNow() + 2) / (1 - this.driftFactor)) + 1;
      await this.extend(Math.min(2 ** 31 - 1, Math.max(newTtl, keep)), newDelay);
      this.ttl = Math.max(this.ttl, newTtl);
      this.lockDelayMs = Math.max(this.lockDelayMs, newDelay);
      this.assertHeld();
      this.raiseLocally(policy);
    })();
  }

  /** The raises that need no round trip: the watchdog and lockAtLeastFor. */
  private raiseLocally(policy: LeasePolicy): void {
    const renewFor = policy.watchdog?.maxHold;
    if (renewFor !== undefined) this.watchdog.raise(renewFor);
    this.atLeast.raise(policy.lockAtLeastFor);
  }

  /**
   * Work running under this lease (the Promise of a body, or what settles when its wrapper lets
   * go of the lease): a shutdown keeps the key until it has settled — or until the validity ends.
   */
  trackWork(work: Promise<unknown>): void {
    if (this.state === 'held') (this.work ??= new LeaseWork()).track(work);
  }

  /** The lease's AbortController (see abortController). */
  get controller(): AbortController {
    if (!this.abortController) {
      this.abortController = new AbortController();
      if (this.lossError) this.abortController.abort(this.lossError);
    }
    return this.abortController;
  }

  /** The LeaseLostError it was lost with, or undefined while held or once released. */
  get lost(): LeaseLostError | undefined {
    return this.lossError;
  }

  /** Whether work is still running under this lease. */
  get working(): boolean {
    return this.work?.active ?? false;
  }

  /**
   * The application shuts down: the signal aborts now (the work is told to stop). The key is
   * given back once the work running under the lease has settled — a replica started meanwhile
   * must not run the same job beside it — or when the lease's validity ends, whichever is first;
   * at once when no work runs. Resolves when the key has been given back (or given up).
   */
  shutDown(): Promise<void> {
    this.lose('shutdown', 'the application is shutting down');
    void this.release();
    return this.releasing ?? Promise.resolve();
  }

  /**
   * A leader ends its term by its own choice (`release()`, the campaign's signal): unlike a plain
   * lease's release, the term's signal aborts (reason `'stepped-down'`), because work other than
   * the caller's may run on it and must stop before the next leader starts. Then the key goes back.
   */
  stepDown(): Promise<void> {
    if (this.state === 'held' && !this.handles.anyOpen && this.lossError === undefined) {
      const error = new LeaseLostError(this.key, 'stepped-down', 'the leader stepped down');
      this.lossError = error;
      this.abortController?.abort(error);
    }
    return this.release();
  }

  /** The signal of reentrant handles: aborts when the lease is lost or released. */
  reentrantSignal(): AbortSignal {
    return this.handles.signal();
  }

  /** A reentrant handle opened on this lease (see ReentrantHandles): its signal. */
  openHandle(): AbortSignal {
    return this.handles.opened();
  }

  closeHandle(): void {
    this.handles.closed();
  }

  private endReason(): LeaseLostError {
    return this.lossError ?? new LeaseLostError(this.key, 'not-owner', 'the lease this handle re-entered was released');
  }

  private endHandles(): void {
    this.handles.end(this.endReason());
  }

  /** What is left of the lease: never more than the backend itself vouches for (a shared session). */
  remainingMs(): number {
    if (this.state !== 'held') return 0;
    const backendUntil = this.backend.validUntil?.(this.owner) ?? Number.POSITIVE_INFINITY;
    return Math.max(0, Math.min(this.validUntilMs, backendUntil) - monotonicNow());
  }

  /** Abort the signal once, with the reason; a lost lease is never revived. */
  lose(reason: LeaseLossReason, detail?: string): void {
    if (this.state !== 'held') return;
    this.state = 'lost';
    this.stopTimers();
    const error = new LeaseLostError(this.key, reason, detail);
    this.lossError = error;
    this.abortController?.abort(error);
    this.endHandles();
    this.observer.lost(this, error);
    // A lock must not outlive its ttl just because its process is healthy: give the key up
    // (owner-checked, so never someone else's), after the lock-delay. Backends with a shared
    // session lease rely on it.
    // A multi-key lease that lost one key still holds the others: they go back the same way.
    const othersLeft = this.keys.length > 1 && (reason === 'not-owner' || reason === 'force-released') && !this.releasing;
    if (reason === 'expired' || reason === 'session-lost' || othersLeft) {
      const giveUp = (): void => void this.release().catch(() => undefined);
      if (this.lockDelayMs > 0) setTimeout(giveUp, this.lockDelayMs).unref();
      else giveUp();
    } else if ((reason === 'not-owner' || reason === 'force-released') && !this.releasing) {
      // Nothing of ours is left on the server: the engine forgets it even if no one releases.
      this.observer.ended(this);
    }
  }

  /**
   * A provisional grant (a hand-off the backend learned of by message): the full ttl counts from
   * the send time `confirmed` resolves with; `undefined` means the key was not ours after all.
   */
  confirmWith(confirmed: Promise<number | undefined>): void {
    void this.calls.send(() => confirmed);
    confirmed.then(
      (sentAt) => {
        if (this.state !== 'held') return;
        if (sentAt === undefined) {
          this.lose('not-owner', 'the hand-off had expired before it was claimed');
          return;
        }
        this.validUntilMs = Math.max(this.validUntilMs, validUntil(sentAt, this.ttlMs, this.driftFactor));
        this.scheduleExpiry();
      },
      // Unreachable backend: the provisional validity stands and runs out (the signal aborts then).
      () => undefined,
    );
  }

  async extend(ttlMs: number, lockDelay = this.lockDelayMs): Promise<void> {
    this.assertHeld();
    let sentAt = 0;
    const owned = await this.calls.send(() => {
      // Lost while an earlier call was answered: nothing is sent.
      this.assertHeld();
      sentAt = monotonicNow();
      // A shorter ttl may take effect on the server the moment the request lands — before its
      // answer comes, or even if the answer is lost: trust the shorter of both from now on.
      const mayEndAt = validUntil(sentAt, ttlMs, this.driftFactor);
      if (mayEndAt < this.validUntilMs) {
        this.validUntilMs = mayEndAt;
        this.scheduleExpiry();
      }
      return this.backend.extend(this.key, this.owner, ttlMs + lockDelay);
    });
    if (!owned) {
      this.lose('not-owner', 'the backend no longer has this owner on the key');
      this.assertHeld();
    }
    // The lease ended while the request was in flight (expired, released, shut down): the holder
    // has been told and must not see it come back. The path that ended it owns what happens to
    // the key (lockAtLeastFor, lockDelay), so nothing is deleted here.
    this.assertHeld();
    this.validUntilMs = validUntil(sentAt, ttlMs, this.driftFactor);
    this.scheduleExpiry();
  }

  /**
   * Give the key back — at once, or when `lockAtLeastFor` has passed since acquiring. Resolves
   * once the backend answered; rejects only if it could not be reached. Idempotent. Shut down
   * while work still runs under the lease: the key goes when that work settles (see shutDown());
   * this resolves at once then — the work itself may be what calls it.
   */
  release(): Promise<void> {
    if (this.state === 'held' && this.handles.anyOpen) {
      // Reentrant handles still open: the key stays theirs until the last one is released.
      this.handles.deferRelease();
      return Promise.resolve();
    }
    if (this.state === 'held') this.state = 'released';
    this.stopTimers();
    this.endHandles();
    if (!this.releasing) {
      this.draining = this.isShutDown() && this.working;
      this.releasing = this.giveBack(this.draining ? this.drain() : undefined);
      this.observer.releasing?.(this, this.releasing);
    }
    return this.draining ? Promise.resolve() : this.releasing;
  }

  private isShutDown(): boolean {
    return this.lossError?.reason === 'shutdown';
  }

  /**
   * Wait until the work under the lease has settled (true) or the lease's validity — its own, and
   * what the backend vouches for — has run out (false).
   */
  private drain(): Promise<boolean> {
    if (!this.work) return Promise.resolve(true);
    return this.work.settledBefore(Math.min(this.validUntilMs, this.backend.validUntil?.(this.owner) ?? Number.POSITIVE_INFINITY));
  }

  private async giveBack(drained?: Promise<boolean>): Promise<void> {
    try {
      if (drained && !(await drained)) {
        // The work outlived the lease: nothing vouches for the key now. It goes as an expired
        // lease's does — at once, or by the server's own expiry, which keeps it for the lock-delay.
        this.observer.workOutlivedShutdown?.(this);
        if (this.lockDelayMs > 0) return;
      }
      await this.giveBackNow();
    } finally {
      this.observer.ended(this);
    }
  }

  private async giveBackNow(): Promise<void> {
    // A shutdown still keeps the key for lockAtLeastFor (a restarted replica must not rerun the
    // same tick); a lease lost any other way has nothing left to keep.
    const keep = this.lossError === undefined || this.lossError.reason === 'shutdown';
    const wasOwner = await this.atLeast.giveBack(this.backend, this.key, this.owner, this.calls, keep);
    this.observer.released(this, wasOwner);
  }

  private assertHeld(): void {
    if (this.state === 'held') return;
    throw this.lossError ?? new LeaseLostError(this.key, 'not-owner', `the lease was ${this.state}`);
  }

  private stopTimers(): void {
    this.expiry.clear();
    this.watchdog.stop();
  }

  private scheduleExpiry(): void {
    this.expiry.set(this.validUntilMs);
  }
}
