// Over 250 lines on purpose: one state machine (held → released | lost) whose transitions —
// expiry, loss, extend, reentrant raises, the watchdog, release with lockAtLeastFor, shutdown
// with work running — all read and write the same validity and settings. Its parts with state of
// their own are apart: the work under it (lease-work.ts), the deadline (common/deadline-timer.ts).
import { LeaseLostError, type LeaseLossReason } from '../errors/lease-lost.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockBackend } from '../backends/lock-backend.interface.js';
import type { LeasePolicy } from './lease-policy.js';
import type { LockKind } from './lock-events.js';
import { DeadlineTimer } from '../common/deadline-timer.js';
import { LeaseWork } from './lease-work.js';
import { monotonicNow, validUntil } from '../common/validity.util.js';

const noop = (): void => undefined;

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
 * The one real lease behind every `Lease` handle (reentrant handles share it). Owns the
 * validity deadline, the abort controller, the expiry timer and the watchdog.
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
  /** The watchdog's maxHold, or undefined without a watchdog. */
  private maxHold: number | undefined;
  private lockAtLeastFor: number;
  /** Monotonic time the watchdog renews up to (undefined: no watchdog). */
  private renewUntil: number | undefined;
  /** Monotonic time until which a release keeps the key (lockAtLeastFor). */
  private keepUntil: number;
  /** The work running under this lease: a shutdown keeps the key while any of it runs. */
  private work?: LeaseWork;
  /** Shut down while work still ran: the key goes when it has settled (or the validity ended). */
  private draining = false;
  private validUntilMs: number;
  readonly driftFactor: number;
  private readonly observer: LeaseObserver;
  private readonly expiry = new DeadlineTimer(() => this.lose('expired', `its ${this.ttlMs} ms ttl ran out`));
  private renewTimer?: NodeJS.Timeout;
  private releasing?: Promise<void>;
  /**
   * This lease's claim or extend still unanswered: the next is sent once it has answered. Calls on
   * pooled connections may land in any order: a claim (ttl) landing after an extend (10 × ttl)
   * would shorten the row under a holder that trusts the extend — two holders.
   */
  private inFlight?: Promise<unknown>;
  /**
   * The signal of every reentrant handle on this lease (one, shared, made on first use): it aborts
   * when the lease ends, however it ends — a released outer lease means the key may have a new holder.
   */
  private reentrant?: AbortController;
  /** Reentrant handles taken and not yet released: the key stays held while any is open. */
  private openHandles = 0;
  /** The owner released while handles were open: give the key back when the last one closes. */
  private releaseDeferred = false;

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
    this.maxHold = init.policy.watchdog?.maxHold;
    this.lockAtLeastFor = init.policy.lockAtLeastFor;
    this.renewUntil = this.maxHold === undefined ? undefined : this.acquiredAt + this.maxHold;
    this.keepUntil = this.acquiredAt + this.lockAtLeastFor;
    this.scheduleExpiry();
    if (this.renewUntil !== undefined) this.scheduleRenewal();
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
    if (renewFor !== undefined && (this.maxHold === undefined || renewFor > this.maxHold)) {
      const hadWatchdog = this.renewUntil !== undefined;
      this.maxHold = renewFor;
      this.renewUntil = Math.max(this.renewUntil ?? 0, monotonicNow() + renewFor);
      if (!hadWatchdog) this.scheduleRenewal();
    }
    if (policy.lockAtLeastFor > this.lockAtLeastFor) {
      this.lockAtLeastFor = policy.lockAtLeastFor;
      this.keepUntil = Math.max(this.keepUntil, monotonicNow() + policy.lockAtLeastFor);
    }
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
    if (this.state === 'held' && this.openHandles === 0 && this.lossError === undefined) {
      const error = new LeaseLostError(this.key, 'stepped-down', 'the leader stepped down');
      this.lossError = error;
      this.abortController?.abort(error);
    }
    return this.release();
  }

  /** The signal of reentrant handles: aborts when the lease is lost or released. */
  reentrantSignal(): AbortSignal {
    if (!this.reentrant) {
      this.reentrant = new AbortController();
      if (this.state !== 'held') this.reentrant.abort(this.endReason());
    }
    return this.reentrant.signal;
  }

  /**
   * A reentrant handle opened on this lease. While any is open the key stays held even if the
   * owner releases first (a listener or detached task the owner started may still be running
   * under it); the last one to close gives the key back then. Expiry still ends it all.
   */
  openHandle(): AbortSignal {
    this.openHandles += 1;
    return this.reentrantSignal();
  }

  closeHandle(): void {
    if (this.openHandles > 0) this.openHandles -= 1;
    if (this.openHandles === 0 && this.releaseDeferred) {
      this.releaseDeferred = false;
      void this.release().catch(() => undefined);
    }
  }

  private endReason(): LeaseLostError {
    return this.lossError ?? new LeaseLostError(this.key, 'not-owner', 'the lease this handle re-entered was released');
  }

  private endHandles(): void {
    if (this.reentrant && !this.reentrant.signal.aborted) this.reentrant.abort(this.endReason());
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
    this.inOrder(() => confirmed);
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
    const owned = await this.inOrder(() => {
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
    if (this.state === 'held' && this.openHandles > 0) {
      // Reentrant handles still open: the key stays theirs until the last one is released.
      this.releaseDeferred = true;
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

  /**
   * Send after this lease's call in flight, if any, has answered (whatever the answer): the
   * backend applies this lease's calls in the order they were made.
   */
  private inOrder<T>(send: () => Promise<T>): Promise<T> {
    const previous = this.inFlight;
    const call = previous ? previous.then(send) : send();
    const settled: Promise<unknown> = call.then(noop, noop);
    this.inFlight = settled;
    void settled.then(() => {
      if (this.inFlight === settled) this.inFlight = undefined;
    });
    return call;
  }

  private async giveBackNow(): Promise<void> {
    const keepFor = this.keepUntil - monotonicNow();
    // A shutdown still keeps the key for lockAtLeastFor (a restarted replica must not rerun the
    // same tick); a lease lost any other way has nothing left to keep.
    const keep = this.lossError === undefined || this.lossError.reason === 'shutdown';
    if (keepFor > 0 && keep) {
      // Keep the key until the at-least time: shorten its life to exactly that, then delete it —
      // after a claim or extend still unanswered, which would otherwise move that end. (A plain
      // release need not wait: a call landing after it finds the key not ours.)
      let keepMs = 1;
      const releaseLater = (): void => void setTimeout(() => void this.backend.release(this.key, this.owner).catch(() => undefined), keepMs).unref();
      let wasOwner: boolean;
      try {
        wasOwner = await this.inOrder(() => {
          keepMs = Math.max(1, Math.ceil(this.keepUntil - monotonicNow()));
          return this.backend.extend(this.key, this.owner, keepMs);
        });
      } catch (error) {
        // Unknown whether the key was shortened: it is still deleted (owner-checked) once the
        // at-least time has passed, and a backend forgets the owner then — not only at its ttl.
        releaseLater();
        throw error;
      }
      this.observer.released(this, wasOwner);
      if (wasOwner) releaseLater();
      return;
    }
    const wasOwner = await this.backend.release(this.key, this.owner);
    this.observer.released(this, wasOwner);
  }

  private assertHeld(): void {
    if (this.state === 'held') return;
    throw this.lossError ?? new LeaseLostError(this.key, 'not-owner', `the lease was ${this.state}`);
  }

  private stopTimers(): void {
    this.expiry.clear();
    clearTimeout(this.renewTimer);
  }

  private scheduleExpiry(): void {
    this.expiry.set(this.validUntilMs);
  }

  /** The watchdog: renew every ttl/3 until released, lost, or `maxHold` is reached. */
  private scheduleRenewal(): void {
    clearTimeout(this.renewTimer);
    this.renewTimer = setTimeout(() => void this.renew(), Math.max(1, Math.floor(this.ttl / 3)));
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    if (this.state !== 'held' || this.renewUntil === undefined) return;
    const holdLeft = this.renewUntil - monotonicNow();
    // Never renew past maxHold: the last renewal ends the lease exactly there.
    const ttl = Math.min(this.ttl, Math.floor(holdLeft));
    if (ttl <= 0) return;
    if (validUntil(monotonicNow(), ttl, this.driftFactor) <= this.validUntilMs) {
      // A renewal would not lengthen the lease (a reentrant acquisition raised it further): never
      // shorten it. Look again later while the watchdog has time left.
      if (ttl === this.ttl) this.scheduleRenewal();
      return;
    }
    try {
      await this.extend(ttl);
      this.observer.renewed(this);
    } catch (error) {
      if (this.state === 'held') this.observer.renewalFailed(this, error);
    }
    if (this.state === 'held' && ttl === this.ttl) this.scheduleRenewal();
  }
}
