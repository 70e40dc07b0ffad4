import type { Logger } from '@nestjs/common';
import type { LeaseLossReason, LeaseLostError } from '../errors/lease-lost.error.js';
import { monotonicNow } from '../common/validity.util.js';
import { LEASE_INTERNALS, type Lease } from './lease.js';
import type { LeaseCore, LeaseObserver } from './lease-core.js';
import type { LockEvents } from './lock-events.js';

const noop = (): void => undefined;

/** An acquisition in flight; `lost` once the backend reported a hold of it gone. */
export interface Attempt {
  lost?: { reason: LeaseLossReason; detail: string };
}

/**
 * The leases one engine granted and has not yet seen end (by owner id: a backend reports a loss
 * by owner, shutdown releases them all), the releases of keys still in flight, and what each
 * lease's life reports — a log line and an event.
 */
export class LeaseRegistry implements LeaseObserver {
  /** The held leases by owner (each lease has an owner id of its own): a backend reports a loss by owner (onLeaseLost), forceRelease() names one. */
  private readonly owners = new Map<string, LeaseCore>();
  /** Releases in flight, by backend, then key: an acquisition of the key by this process waits for them. */
  private readonly releasingKeys = new Map<string, Map<string, { core: LeaseCore; done: Promise<void> }>>();

  /**
   * Acquisitions in flight, by owner: a loss the backend reports for one before its lease exists
   * is kept here for the engine to see at the grant (or, for a multi-key attempt, before its next try).
   */
  private readonly attempts = new Map<string, Attempt>();

  constructor(
    private readonly events: LockEvents,
    private readonly logger: Logger,
  ) {}

  /** What it keeps per lease, owner and key (see LockBackend.bookkeeping). */
  bookkeeping(): Record<string, string[]> {
    const releasing = [...this.releasingKeys].flatMap(([backend, keys]) => [...keys.keys()].map((key) => `${backend}:${key}`));
    return { held: [...this.owners.keys()], releasing, attempts: [...this.attempts.keys()] };
  }

  add(core: LeaseCore): void {
    this.owners.set(core.owner, core);
  }

  byOwner(owner: string): LeaseCore | undefined {
    const core = this.owners.get(owner);
    if (core) return core;
    // A multi-key lease's keys are held by `<owner>.<generation>-<index>` (see MultiKeyBackend's ownerOf).
    const dot = owner.indexOf('.');
    return dot > 0 ? this.owners.get(owner.slice(0, dot)) : undefined;
  }

  /** An acquisition by `owner` is in flight (until `attempted(owner)`). */
  attempting(owner: string): Attempt {
    const attempt: Attempt = {};
    this.attempts.set(owner, attempt);
    return attempt;
  }

  attempted(owner: string): void {
    this.attempts.delete(owner);
  }

  /**
   * The backend says `owner`'s hold is gone: its lease is lost, or — no lease yet — the
   * acquisition in flight is told (it must not grant a lease on a key it no longer holds).
   */
  lose(owner: string, reason: LeaseLossReason, detail: string): void {
    const core = this.byOwner(owner);
    if (core) return core.lose(reason, detail);
    const attempt = this.attempts.get(owner) ?? this.attempts.get(owner.slice(0, Math.max(0, owner.indexOf('.'))));
    if (attempt) attempt.lost ??= { reason, detail };
  }

  all(): LeaseCore[] {
    return [...this.owners.values()];
  }

  /** A release of `key` at `backend` by this process still in flight, if any (settles, never rejects). */
  pendingRelease(backend: string, key: string): Promise<void> | undefined {
    const done = this.releasingKeys.get(backend)?.get(key)?.done;
    return done?.then(noop, noop);
  }

  /** A release of the key went out; `ended(core)` comes when the backend has answered. */
  releasing(core: LeaseCore, done: Promise<void>): void {
    let keys = this.releasingKeys.get(core.backendName);
    if (!keys) this.releasingKeys.set(core.backendName, (keys = new Map()));
    for (const key of core.keys) keys.set(key, { core, done });
  }

  /** A handle's release failed: reported, never thrown over the caller's own outcome. */
  releaseFailed(lease: Lease, error: unknown): void {
    this.logger.warn(`Release of "${lease.key}" (${lease.purpose}, ${lease.backend}) failed; it expires by itself: ${(error as Error)?.message ?? error}`);
    this.events.emit('release-failed', { key: lease.key, purpose: lease.purpose, backend: lease.backend, kind: LEASE_INTERNALS.core(lease).kind, error });
  }

  lost(core: LeaseCore, error: LeaseLostError): void {
    if (error.reason !== 'shutdown') {
      this.logger.warn(`Lease on "${core.key}" (${core.purpose}, ${core.backendName}) lost: ${error.message}`);
    }
    this.events.emit('lost', { key: core.key, purpose: core.purpose, backend: core.backendName, kind: core.kind, error });
  }

  released(core: LeaseCore, wasOwner: boolean): void {
    if (this.events.listenerCount('released') === 0) return;
    this.events.emit('released', {
      key: core.key,
      purpose: core.purpose,
      backend: core.backendName,
      kind: core.kind,
      heldMs: monotonicNow() - core.acquiredAt,
      wasOwner,
    });
  }

  renewed(core: LeaseCore): void {
    this.events.emit('renewed', { key: core.key, purpose: core.purpose, backend: core.backendName, kind: core.kind, remainingMs: core.remainingMs() });
  }

  renewalFailed(core: LeaseCore, error: unknown): void {
    this.logger.warn(
      `Renewal of "${core.key}" (${core.purpose}, ${core.backendName}) failed; ${Math.round(core.remainingMs())} ms of validity left: ${(error as Error)?.message ?? error}`,
    );
    this.events.emit('renewal-failed', { key: core.key, purpose: core.purpose, backend: core.backendName, kind: core.kind, error });
  }

  workOutlivedShutdown(core: LeaseCore): void {
    this.logger.warn(
      `Work under "${core.key}" (${core.purpose}, ${core.backendName}) was still running when its lease's validity ran out ` +
        'during shutdown; the key was given up (another owner may take it now)',
    );
  }

  ended(core: LeaseCore): void {
    if (this.owners.get(core.owner) === core) this.owners.delete(core.owner);
    const keys = this.releasingKeys.get(core.backendName);
    if (!keys) return;
    for (const key of core.keys) if (keys.get(key)?.core === core) keys.delete(key);
    if (keys.size === 0) this.releasingKeys.delete(core.backendName);
  }
}
