import type { LockBackend } from '../backends/lock-backend.interface.js';
import type { LeaseLostError } from '../errors/lease-lost.error.js';
import type { LeaseSettings } from './lease-settings.js';
import type { LeaseWork } from './lease-work.js';
import type { OrderedCalls } from './ordered-calls.js';

/** What giving a lease's key back reads of the lease, and tells it. */
export interface GiveBackHost {
  readonly key: string;
  readonly owner: string;
  readonly backend: LockBackend;
  readonly calls: OrderedCalls;
  readonly settings: LeaseSettings;
  /** How the lease ended, if not by release. */
  readonly lossError: LeaseLostError | undefined;
  readonly work: LeaseWork | undefined;
  /** Monotonic time until which the grant may be trusted. */
  readonly validUntilMs: number;
  released(wasOwner: boolean): void;
  /** The lease is over: the engine forgets it. */
  ended(): void;
  /** Shut down with work still running under it, and that work outlived the validity. */
  outlived(): void;
  /** The give-back went out (settles when the backend answered). */
  releasing(done: Promise<void>): void;
}

/**
 * Giving one lease's key back, once: at once, after `lockAtLeastFor`, or — the application
 * shutting down while work still runs under the lease — when that work has settled or the
 * validity has run out, whichever is first.
 */
export class LeaseGiveBack {
  private releasing?: Promise<void>;
  /** Shut down while work still ran: the key goes when it has settled (or the validity ended). */
  private draining = false;

  constructor(private readonly lease: GiveBackHost) {}

  /** The give-back went out already (it settles when the backend answered). */
  get started(): Promise<void> | undefined {
    return this.releasing;
  }

  /** Start it (idempotent). Resolves once the backend answered — at once while draining. */
  start(): Promise<void> {
    if (!this.releasing) {
      this.draining = this.lease.lossError?.reason === 'shutdown' && (this.lease.work?.active ?? false);
      this.releasing = this.draining ? this.giveBack(this.drain()) : this.giveBackNow();
      this.lease.releasing(this.releasing);
    }
    return this.draining ? Promise.resolve() : this.releasing;
  }

  /**
   * Wait until the work under the lease has settled (true) or the lease's validity — its own, and
   * what the backend vouches for — has run out (false).
   */
  private drain(): Promise<boolean> {
    const { work, backend, owner, validUntilMs } = this.lease;
    if (!work) return Promise.resolve(true);
    return work.settledBefore(Math.min(validUntilMs, backend.validUntil?.(owner) ?? Number.POSITIVE_INFINITY));
  }

  /**
   * The common case — no work to wait for, nothing to keep for `lockAtLeastFor` — as one owner-
   * checked release and its answer, without the general path's awaits.
   */
  private giveBackNow(): Promise<void> {
    const { lossError, settings, backend, key, owner } = this.lease;
    if ((lossError === undefined || lossError.reason === 'shutdown') && settings.atLeast.keeps()) return this.giveBack();
    let released: Promise<boolean>;
    try {
      released = backend.release(key, owner);
    } catch (error) {
      released = Promise.reject(error);
    }
    return released.then(
      (wasOwner) => {
        try {
          this.lease.released(wasOwner);
        } finally {
          this.lease.ended();
        }
      },
      (error: unknown) => {
        this.lease.ended();
        throw error;
      },
    );
  }

  private async giveBack(drained?: Promise<boolean>): Promise<void> {
    try {
      if (drained && !(await drained)) {
        // The work outlived the lease: nothing vouches for the key now. It goes as an expired
        // lease's does — at once, or by the server's own expiry, which keeps it for the lock-delay.
        this.lease.outlived();
        if (this.lease.settings.lockDelayMs > 0) return;
      }
      // A shutdown still keeps the key for lockAtLeastFor (a restarted replica must not rerun the
      // same tick); a lease lost any other way has nothing left to keep.
      const { lossError, settings, backend, key, owner } = this.lease;
      const keep = lossError === undefined || lossError.reason === 'shutdown';
      this.lease.released(await settings.atLeast.giveBack(backend, key, owner, this.lease, keep));
    } finally {
      this.lease.ended();
    }
  }
}
