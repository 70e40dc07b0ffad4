import { LeaseLostError, type LeaseLossReason } from '../errors/lease-lost.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockBackend } from '../backends/lock-backend.interface.js';
import type { LeasePolicy } from './lease-policy.js';
import type { LockKind } from './lock-events.js';
import type { LeaseCoreInit, LeaseObserverOf, LeaseState } from './lease-core.types.js';
import { LeaseExpiry } from './lease-expiry.js';
import { LeaseWork } from './lease-work.js';
import { LeaseSettings, type SettingsHost } from './lease-settings.js';
import { LeaseGiveBack, type GiveBackHost } from './lease-give-back.js';
import { OrderedCalls } from './ordered-calls.js';
import { ReentrantHandles } from './reentrant-handles.js';
import { LeaseSignal } from './lease-signal.js';
import { monotonicNow, validUntil } from '../common/validity.util.js';

export type LeaseObserver = LeaseObserverOf<LeaseCore>;
export type { LeaseState };

/**
 * The one real lease behind every `Lease` handle (reentrant handles share it): one state machine
 * (held → released | lost) whose transitions — expiry, loss, extend, reentrant raises, release
 * with lockAtLeastFor, shutdown with work running — read and write the same validity. Its parts
 * with state of their own are apart: the settings in force with the watchdog (lease-settings.ts),
 * the give-back (lease-give-back.ts), the signal (lease-signal.ts), the reentrant handles, the work
 * under it (lease-work.ts), the order of its calls (ordered-calls.ts), the deadline timer.
 *
 * Server-side, a key lives `ttl + lockDelay`; the holder trusts it for `ttl` minus drift. A
 * release deletes it at once (or after `lockAtLeastFor`); an involuntary loss leaves it for the
 * lock-delay, so the next holder cannot start while the lost one may still be acting.
 */
export class LeaseCore {
  /** Why the lease was lost, and its signal. */
  private readonly ending = new LeaseSignal();
  readonly acquiredAt = monotonicNow();
  readonly key: string;
  /** Every key the lease holds, sorted (one for a plain lease). */
  readonly keys: readonly string[];
  readonly purpose: LockPurpose;
  /** Its fencing token: a new, larger one when an upgradeable read becomes the write lease. */
  token: bigint | undefined;
  readonly backend: LockBackend;
  readonly backendName: string;
  readonly permits: number;
  /** 'read' or 'upgradeable' for a read-write lock's reader; 'write' once upgraded, and for every other lease. */
  mode: LeaseCoreInit<LeaseCore>['mode'];
  readonly kind: LockKind;
  readonly owner: string;
  /** The options it was acquired with (a reentrant acquisition may raise the settings below). */
  readonly policy: LeasePolicy;
  state: LeaseState = 'held';
  /** The settings in force: those it was acquired with, raised by reentrant acquisitions (see raise()). */
  private readonly settings: LeaseSettings;
  /** The work running under this lease: a shutdown keeps the key while any of it runs. */
  private work?: LeaseWork;
  private validUntilMs: number;
  readonly driftFactor: number;
  private readonly observer: LeaseObserver;
  private readonly expiry = new LeaseExpiry(() => this.lose('expired', `its ${this.ttlMs} ms ttl ran out`));
  /** Giving the key back, once (released, lost, or shut down). */
  private readonly giveBack: LeaseGiveBack;
  /** A claim, extends, renewals, the lockAtLeastFor extend in order; the handles: both made on first use. */
  private orderedCalls?: OrderedCalls;
  private reentrantHandles?: ReentrantHandles;

  constructor(init: LeaseCoreInit<LeaseCore>) {
    ({ key: this.key, purpose: this.purpose, token: this.token, backend: this.backend, backendName: this.backendName } = init);
    ({ permits: this.permits, mode: this.mode, kind: this.kind, owner: this.owner, validUntilMs: this.validUntilMs } = init);
    ({ driftFactor: this.driftFactor, policy: this.policy, observer: this.observer } = init);
    this.keys = init.keys ?? [init.key];
    const host = new CoreHost(this);
    this.settings = new LeaseSettings(host, init.policy, init.ttlMs, this.acquiredAt);
    this.giveBack = new LeaseGiveBack(host);
    this.scheduleExpiry();
  }

  /** Its calls to the backend, in order (extends, renewals, an upgrade). */
  get calls(): OrderedCalls { return (this.orderedCalls ??= new OrderedCalls()); }

  private get handles(): ReentrantHandles {
    const ended = (): LeaseLostError | undefined => (this.state === 'held' ? undefined : this.endReason());
    return (this.reentrantHandles ??= new ReentrantHandles(ended, () => void this.release().catch(() => undefined)));
  }

  /** The ttl in force (the acquisition's, or a longer one a reentrant acquisition asked for). */
  get ttlMs(): number { return this.settings.ttl; }
  get lockDelayMs(): number { return this.settings.lockDelayMs; }

  /**
   * A reentrant acquisition nested in this lease asks for `ttl` and `policy`: it gets every setting
   * longer than the lease's (LeaseSettings.raise): the extend in flight, or undefined if none was needed.
   * @throws LeaseLostError the lease is lost (the nested work must not start)
   * @throws LockBackendUnavailableError the extend could not reach the backend (rejects)
   */
  raise(ttl: number, policy: LeasePolicy): Promise<void> | undefined {
    this.assertHeld();
    return this.settings.raise(ttl, policy);
  }

  /** Work running under this lease (a body's Promise): a shutdown keeps the key until it settles, or the validity ends. */
  trackWork(work: Promise<unknown>): void {
    if (this.state === 'held') (this.work ??= new LeaseWork()).track(work);
  }

  /** The lease's AbortController (made on first read: see LeaseSignal). */
  get controller(): AbortController { return this.ending.controller; }

  /** An upgradeable read became the write lease (lease-upgrade.ts): a new token, the ttl from the request's send time. */
  upgraded(token: bigint | undefined, sentAt: number): void {
    this.assertHeld();
    this.mode = 'write';
    this.token = token ?? this.token;
    this.validUntilMs = validUntil(sentAt, this.ttlMs, this.driftFactor);
    this.scheduleExpiry();
  }

  /** The LeaseLostError it was lost with, or undefined while held or once released. */
  get lost(): LeaseLostError | undefined { return this.ending.error; }

  /** Whether work is still running under this lease. */
  get working(): boolean { return this.work?.active ?? false; }

  /**
   * The application shuts down: the signal aborts now (the work is told to stop). The key is
   * given back once the work running under the lease has settled — a replica started meanwhile
   * must not run the same job beside it — or when the lease's validity ends, whichever is first;
   * at once when no work runs. Resolves when the key has been given back (or given up).
   */
  shutDown(): Promise<void> {
    this.lose('shutdown', 'the application is shutting down');
    void this.release();
    return this.giveBack.started ?? Promise.resolve();
  }

  /**
   * A leader ends its term by its own choice (`release()`, the campaign's signal): unlike a plain
   * lease's release, the term's signal aborts (reason `'stepped-down'`), because work other than
   * the caller's may run on it and must stop before the next leader starts. Then the key goes back.
   */
  stepDown(): Promise<void> {
    if (this.state === 'held' && !this.reentrantHandles?.anyOpen && this.ending.error === undefined) {
      const error = new LeaseLostError(this.key, 'stepped-down', 'the leader stepped down');
      this.ending.abort(error);
    }
    return this.release();
  }

  /** A reentrant handle opened on this lease (see ReentrantHandles): its signal. */
  openHandle(): AbortSignal {
    return this.handles.opened();
  }

  closeHandle(): void {
    this.handles.closed();
  }

  private endReason(): LeaseLostError {
    return this.ending.error ?? new LeaseLostError(this.key, 'not-owner', 'the lease this handle re-entered was released');
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
    this.ending.abort(error);
    this.reentrantHandles?.end();
    this.observer.lost(this, error);
    // A lock must not outlive its ttl just because its process is healthy: give the key up
    // (owner-checked, so never someone else's), after the lock-delay. Backends with a shared
    // session lease rely on it.
    // A multi-key lease that lost one key still holds the others: they go back the same way.
    const othersLeft = this.keys.length > 1 && (reason === 'not-owner' || reason === 'force-released') && !this.giveBack.started;
    if (reason === 'expired' || reason === 'session-lost' || othersLeft) {
      const giveUp = (): void => void this.release().catch(() => undefined);
      if (this.settings.lockDelayMs > 0) setTimeout(giveUp, this.settings.lockDelayMs).unref();
      else giveUp();
    } else if ((reason === 'not-owner' || reason === 'force-released') && !this.giveBack.started) {
      // Nothing of ours is left on the server: the engine forgets it even if no one releases.
      this.observer.ended(this);
    }
  }

  /**
   * A provisional grant (a hand-off the backend learned of by message): the full ttl counts from
   * the send time `confirmed` resolves with; `undefined` means the key was not ours after all.
   */
  confirmWith(confirmed: Promise<number | undefined>): void {
    void this.calls.send(() => this.expiry.lengthen(confirmed));
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

  async extend(ttlMs: number, lockDelay = this.settings.lockDelayMs): Promise<void> {
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
      return this.expiry.lengthen(this.backend.extend(this.key, this.owner, ttlMs + lockDelay));
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
    if (this.state === 'held' && this.reentrantHandles?.anyOpen) {
      // Reentrant handles still open: the key stays theirs until the last one is released.
      this.reentrantHandles.deferRelease();
      return Promise.resolve();
    }
    if (this.state === 'held') this.state = 'released';
    this.stopTimers();
    this.reentrantHandles?.end();
    return this.giveBack.start();
  }

  private assertHeld(): void {
    if (this.state === 'held') return;
    throw this.ending.error ?? new LeaseLostError(this.key, 'not-owner', `the lease was ${this.state}`);
  }

  private stopTimers(): void {
    this.expiry.clear();
    this.settings.watchdog?.stop();
  }

  private scheduleExpiry(): void { this.expiry.set(this.validUntilMs); }
}

/**
 * What the lease's settings and its give-back read of it and tell it: one object per lease whose
 * accessors live on the prototype. Object literals with getters and arrow functions (as before)
 * cost an accessor definition and a closure each per grant: with the error below, they had made
 * the service's client CPU per lock 1.4-1.9x (issue 34's bench check). It is the lease's own part,
 * kept in its file, so it reads the lease's private fields.
 */
class CoreHost implements SettingsHost, GiveBackHost {
  constructor(private readonly core: LeaseCore) {}
  get held(): boolean { return this.core.state === 'held'; }
  get trustedUntil(): number { return this.core['validUntilMs']; }
  get driftFactor(): number { return this.core.driftFactor; }
  extend(ttl: number, lockDelay: number): Promise<void> { return this.core.extend(ttl, lockDelay); }
  assertHeld(): void { this.core['assertHeld'](); }
  renewed(): void { this.core['observer'].renewed(this.core); }
  renewalFailed(error: unknown): void { this.core['observer'].renewalFailed(this.core, error); }
  get key(): string { return this.core.key; }
  get owner(): string { return this.core.owner; }
  get backend(): LockBackend { return this.core.backend; }
  get calls(): OrderedCalls { return this.core['calls']; }
  get settings(): LeaseSettings { return this.core['settings']; }
  get lossError(): LeaseLostError | undefined { return this.core['ending'].error; }
  get work(): LeaseWork | undefined { return this.core['work']; }
  get validUntilMs(): number { return this.core['validUntilMs']; }
  released(wasOwner: boolean): void { this.core['observer'].released(this.core, wasOwner); }
  ended(): void { this.core['observer'].ended(this.core); }
  outlived(): void { this.core['observer'].workOutlivedShutdown?.(this.core); }
  releasing(done: Promise<void>): void { this.core['observer'].releasing?.(this.core, done); }
}
