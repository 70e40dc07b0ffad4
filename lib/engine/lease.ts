import { LeaseLostError } from '../errors/lease-lost.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import { checkTtl } from '../common/checks.util.js';
import type { LeaseCore } from './lease-core.js';
import { upgradeLease } from './lease-upgrade.js';
import type { LockMode } from '../interfaces/lock-options.interface.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';

/**
 * What the engine reads and does on a lease handle, kept off the published class: the package's
 * entry points do not export it.
 */
export interface LeaseInternals {
  create(core: LeaseCore, owning: boolean, onDisposeError: (lease: Lease, error: unknown) => void): Lease;
  core(lease: Lease): LeaseCore;
  /** Still held by this handle: not released, not lost. */
  held(lease: Lease): boolean;
  /**
   * The `LeaseLostError` the handle's signal has aborted (or would abort) with, without making
   * the signal: an owning lease's loss, or a reentrant handle's end.
   */
  lostWith(lease: Lease): LeaseLostError | undefined;
  /**
   * Settles when the handle is released: the end of work a wrapper runs under it that has no
   * Promise of its own (an Observable's subscription ends with the release).
   */
  whenReleased(lease: Lease): Promise<void>;
}

/** Filled in by `Lease`'s static block, the one place with access to its private parts. */
export const LEASE_INTERNALS = {} as LeaseInternals;

/**
 * A distributed lock is a lease: it holds only while it is valid. Hold work to `signal`, and with
 * `purpose: 'correctness'` hand `token` to the resource so it can refuse a stale holder.
 *
 * @example
 * await using lease = await locks.acquire('report', { purpose: 'efficiency', ttl: 10_000 });
 * await buildReport({ signal: lease.signal });
 */
export class Lease implements AsyncDisposable {
  private ended = false;
  /** Settles when this handle is released (see whenReleased()). */
  private released?: { promise: Promise<void>; resolve: () => void };
  /** A reentrant handle's signal: it also aborts when the outer lease is released first. */
  private readonly handle?: { signal: AbortSignal };

  /** Leases come from `DistributedLockService`, never from `new` (the engine makes them through LEASE_INTERNALS). */
  private constructor(
    private readonly core: LeaseCore,
    /** false for a reentrant handle: releasing it leaves the outer lease in place. */
    private readonly owning: boolean,
    private readonly onDisposeError: (lease: Lease, error: unknown) => void,
  ) {
    if (!owning) this.handle = { signal: core.openHandle() };
  }

  /** The key as the caller named it (without backend prefixes); a multi-key lease's first key. */
  get key(): string {
    return this.core.key;
  }

  /** Every key this lease holds, sorted (`[key]` for a lease on one key). */
  get keys(): readonly string[] {
    return this.core.keys;
  }

  get purpose(): LockPurpose {
    return this.core.purpose;
  }

  /** Name of the backend that granted the lease (as configured in the module). */
  get backend(): string {
    return this.core.backendName;
  }

  /**
   * Fencing token: strictly greater than every earlier holder's token of this key. Present only
   * from backends with the `fencing` capability (never from Redis).
   */
  get token(): bigint | undefined {
    return this.core.token;
  }

  /** Aborts with a `LeaseLostError` the moment the lease is known or presumed lost. */
  get signal(): AbortSignal {
    return this.handle?.signal ?? this.core.controller.signal;
  }

  /**
   * How it holds the key: `'write'` alone (a plain lock, and an upgradeable read once upgraded),
   * `'read'` beside other readers, `'upgradeable'` beside readers until `upgrade()`.
   */
  get mode(): LockMode {
    return this.core.mode;
  }

  /**
   * Make an upgradeable read (`mode: 'upgradeable'`) the write lease without letting go of the
   * key: waits, first in line, for the other readers to leave — readers that come meanwhile queue
   * behind it, and no writer can enter in between. Then `mode` is `'write'`, and on a fencing
   * backend `token` is a new one, larger than every reader's. Resolves at once if upgraded already.
   * Rejects with `LeaseLostError` if the lease is lost or released meanwhile, and with
   * `InvalidLockOptionsError` (field `mode`) for a lease of another mode or a reentrant handle.
   * It waits as long as the readers hold: their ttls bound it, or abort through the lease's loss.
   * Through a backend outage it keeps its place and tries again until the lease itself ends.
   */
  upgrade(): Promise<void> {
    if (this.ended) return Promise.reject(new LeaseLostError(this.key, 'not-owner', 'this handle was released'));
    if (!this.owning) {
      return Promise.reject(new InvalidLockOptionsError('mode', 'a reentrant handle cannot upgrade: upgrade() the outer lease, which holds the key', `upgrade() of "${this.key}"`));
    }
    return upgradeLease(this.core, LEASE_INTERNALS.whenReleased(this));
  }

  /** true for a handle obtained by acquiring a key this async context already held. */
  get reentrant(): boolean {
    return !this.owning;
  }

  /** Milliseconds the lease can still be trusted (monotonic clock, drift allowance deducted); 0 once lost. */
  remainingMs(): number {
    return this.ended || this.handle?.signal.aborted ? 0 : this.core.remainingMs();
  }

  /**
   * Reset the lease's time to live to `ttlMs` (default: the ttl it was acquired with), if it is
   * still held. Throws `LeaseLostError` if it is not — a lost lease is never revived.
   */
  extend(ttlMs: number = this.core.ttlMs): Promise<void> {
    if (this.ended) return Promise.reject(new LeaseLostError(this.key, 'not-owner', 'this handle was released'));
    if (this.handle?.signal.aborted) return Promise.reject(this.handle.signal.reason);
    // The same bounds as acquire's ttl: whole ms, up to what a timer can wait, and enough left
    // after the drift allowance to be worth holding.
    try {
      checkTtl(ttlMs, 'ttlMs', this.core.driftFactor, `extend() of "${this.key}"`);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.core.extend(ttlMs);
  }

  /**
   * Give the lock back. Idempotent. Never deletes another owner's key. A reentrant handle only
   * marks itself released; the outermost lease releases the key — once every reentrant handle
   * taken from it is released too (until then, or until the ttl runs out, the key stays held).
   * A leader's term (`campaign()`) steps down: its `signal` aborts with reason `'stepped-down'`.
   */
  release(): Promise<void> {
    if (this.ended) return Promise.resolve();
    this.ended = true;
    this.released?.resolve();
    try {
      // A leader's release ends its term: the signal aborts ('stepped-down') for any work on it.
      if (this.owning) return this.core.kind === 'leader' ? this.core.stepDown() : this.core.release();
      this.core.closeHandle();
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** `await using lease = …`: releases on scope exit and never throws over the scope's own error. */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      this.onDisposeError(this, error);
    }
  }

  static {
    Object.assign(LEASE_INTERNALS, {
      create: (core, owning, onDisposeError) => new Lease(core, owning, onDisposeError),
      core: (lease) => lease.core,
      held: (lease) => !lease.ended && lease.core.state === 'held' && !lease.handle?.signal.aborted,
      lostWith: (lease) =>
        lease.handle ? (lease.handle.signal.aborted ? (lease.handle.signal.reason as LeaseLostError) : undefined) : lease.core.lost,
      whenReleased: (lease) => {
        if (!lease.released) {
          let resolve!: () => void;
          const promise = new Promise<void>((r) => (resolve = r));
          lease.released = { promise, resolve };
          if (lease.ended) resolve();
        }
        return lease.released.promise;
      },
    } satisfies LeaseInternals);
  }
}
