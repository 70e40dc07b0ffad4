import { LeaseLostError, type LeaseLossReason } from '../errors/lease-lost.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockBackend } from '../interfaces/lock-backend.interface.js';
import { monotonicNow, validUntil } from './validity.util.js';

/** How a lease tells its engine what happened to it. */
export interface LeaseObserver {
  lost(core: LeaseCore, error: LeaseLostError): void;
  /** The lease is over (released or lost and cleaned up); forget it. */
  ended(core: LeaseCore): void;
  released(core: LeaseCore, wasOwner: boolean): void;
}

export type LeaseState = 'held' | 'released' | 'lost';

/**
 * The one real lease behind every `Lease` handle (reentrant handles share it). Owns the
 * validity deadline, the abort controller and the expiry timer.
 */
export class LeaseCore {
  readonly controller = new AbortController();
  readonly acquiredAt = monotonicNow();
  state: LeaseState = 'held';
  private timer?: NodeJS.Timeout;

  constructor(
    readonly key: string,
    readonly purpose: LockPurpose,
    readonly token: bigint | undefined,
    readonly backend: LockBackend,
    readonly owner: string,
    readonly ttlMs: number,
    private validUntilMs: number,
    private readonly driftFactor: number,
    private readonly observer: LeaseObserver,
  ) {
    this.schedule();
  }

  remainingMs(): number {
    if (this.state !== 'held') return 0;
    return Math.max(0, this.validUntilMs - monotonicNow());
  }

  /** Abort the signal once, with the reason; a lost lease is never revived. */
  lose(reason: LeaseLossReason, detail?: string): void {
    if (this.state !== 'held') return;
    this.state = 'lost';
    clearTimeout(this.timer);
    const error = new LeaseLostError(this.key, reason, detail);
    this.controller.abort(error);
    this.observer.lost(this, error);
    // A lock must not outlive its ttl just because its process is healthy: give the key up
    // (owner-checked, so never someone else's). Backends with a shared session lease rely on it.
    if (reason === 'expired' || reason === 'session-lost') void this.release().catch(() => undefined);
  }

  async extend(ttlMs: number): Promise<void> {
    this.assertHeld();
    const sentAt = monotonicNow();
    const owned = await this.backend.extend(this.key, this.owner, ttlMs);
    if (!owned) {
      this.lose('not-owner', 'the backend no longer has this owner on the key');
      this.assertHeld();
    }
    // The timer may have fired while the request was in flight: the holder has been told the
    // lease is gone and must not see it come back. Give the key up rather than sit on it.
    if (this.state !== 'held') {
      void this.backend.release(this.key, this.owner).catch(() => undefined);
      this.assertHeld();
    }
    this.validUntilMs = validUntil(sentAt, ttlMs, this.driftFactor);
    this.schedule();
  }

  /** Give the key back. Resolves once the backend answered; rejects only if it could not be reached. */
  async release(): Promise<void> {
    if (this.state === 'released') return;
    this.state = 'released';
    clearTimeout(this.timer);
    try {
      const wasOwner = await this.backend.release(this.key, this.owner);
      this.observer.released(this, wasOwner);
    } finally {
      this.observer.ended(this);
    }
  }

  private assertHeld(): void {
    if (this.state === 'held') return;
    const reason = this.controller.signal.reason;
    throw reason instanceof LeaseLostError ? reason : new LeaseLostError(this.key, 'not-owner', `the lease was ${this.state}`);
  }

  private schedule(): void {
    clearTimeout(this.timer);
    const remaining = this.validUntilMs - monotonicNow();
    if (remaining <= 0) {
      this.lose('expired', `its ${this.ttlMs} ms ttl ran out`);
      return;
    }
    this.timer = setTimeout(() => this.lose('expired', `its ${this.ttlMs} ms ttl ran out`), Math.ceil(remaining));
    this.timer.unref();
  }
}
