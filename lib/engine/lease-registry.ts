import type { Logger } from '@nestjs/common';
import type { LeaseLossReason, LeaseLostError } from '../errors/lease-lost.error.js';
import { monotonicNow } from '../common/validity.util.js';
import { LEASE_INTERNALS, type Lease } from './lease.js';
import type { LeaseCore, LeaseObserver } from './lease-core.js';
import type { LockEvents } from './lock-events.js';

const noop = (): void => undefined;

/** An acquisition in flight; `lost` once the backend reported a hold of it gone. */
export class Attempt {
  lost?: { reason: LeaseLossReason; detail: string };
}

/**
 * The leases one engine granted and has not yet seen end (by owner id: a backend reports a loss
 * by owner, shutdown releases them all), the releases of keys still in flight, and what each
 * lease's life reports — a log line and an event.
 */
export class LeaseRegistry implements LeaseObserver {
  /**
   * Every owner id this engine has in play, once: its acquisition in flight (an Attempt), then its
   * lease (replacing the attempt at the grant), until it ends. A backend reports a loss by owner
   * (onLeaseLost), forceRelease() names one; a loss reported for an attempt — before its lease
   * exists — is kept for the engine to see at the grant (or, for a multi-key attempt, before its
   * next try). One map, not one per stage: a fresh owner id is hashed and inserted once.
   */
  private readonly owners = new Map<string, LeaseCore | Attempt>();
  /** Releases in flight, by backend, then key: an acquisition of the key by this process waits for them. */
  private readonly releasingKeys = new Map<string, Map<string, { core: LeaseCore; done: Promise<void> }>>();

  constructor(
    private readonly events: LockEvents,
    private readonly logger: Logger,
  ) {}

  /** What it keeps per lease, owner and key (see LockBackend.bookkeeping). */
  bookkeeping(): Record<string, string[]> {
    const releasing = [...this.releasingKeys].flatMap(([backend, keys]) => [...keys.keys()].map((key) => `${backend}:${key}`));
    const owners = [...this.owners];
    const held = owners.filter(([, v]) => !(v instanceof Attempt)).map(([owner]) => owner);
    return { held, releasing, attempts: owners.filter(([, v]) => v instanceof Attempt).map(([owner]) => owner) };
  }

  add(core: LeaseCore): void {
    this.owners.set(core.owner, core);
  }

  byOwner(owner: string): LeaseCore | undefined {
    const entry = this.entryOf(owner);
    return entry instanceof Attempt ? undefined : entry;
  }

  /** `owner`'s attempt or lease; a multi-key lease's keys are held by `<owner>.<generation>-<index>` (see MultiKeyBackend's ownerOf). */
  private entryOf(owner: string): LeaseCore | Attempt | undefined {
    const entry = this.owners.get(owner);
    if (entry) return entry;
    const dot = owner.indexOf('.');
    return dot > 0 ? this.owners.get(owner.slice(0, dot)) : undefined;
  }

  /** An acquisition by `owner` is in flight (until `attempted(owner)`, or its grant). */
  attempting(owner: string): Attempt {
    const attempt = new Attempt();
    this.owners.set(owner, attempt);
    return attempt;
  }

  /** `owner`'s acquisition is over; a lease it was granted stays. */
  attempted(owner: string): void {
    if (this.owners.get(owner) instanceof Attempt) this.owners.delete(owner);
  }

  /**
   * The backend says `owner`'s hold is gone: its lease is lost, or — no lease yet — the
   * acquisition in flight is told (it must not grant a lease on a key it no longer holds).
   */
  lose(owner: string, reason: LeaseLossReason, detail: string): void {
    const entry = this.entryOf(owner);
    if (entry instanceof Attempt) entry.lost ??= { reason, detail };
    else entry?.lose(reason, detail);
  }

  all(): LeaseCore[] {
    const cores: LeaseCore[] = [];
    for (const entry of this.owners.values()) if (!(entry instanceof Attempt)) cores.push(entry);
    return cores;
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
    // The backend's map stays when empty (one per backend): made again for every release, it cost
    // a Map per sequential lock.
    for (const key of core.keys) if (keys.get(key)?.core === core) keys.delete(key);
  }
}
