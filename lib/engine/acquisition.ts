import type { AcquireResult, LockBackend } from '../backends/lock-backend.interface.js';
import { monotonicNow, validUntil } from '../common/validity.util.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { LockBusyError } from '../errors/lock-busy.error.js';
import type { InFlight } from './in-flight.js';
import { LEASE_INTERNALS, type Lease } from './lease.js';
import type { LeaseContext } from './lease-context.js';
import type { LeaseGrants } from './lease-grants.js';
import type { LeaseRegistry } from './lease-registry.js';
import type { LockEvents } from './lock-events.js';
import { kindOf, type LockRequest } from './lock-request.js';
import { withPermits } from '../backends/semaphore.util.js';
import { withMode } from '../backends/read-write.util.js';
import { MultiKeyBackend } from './multi-key.backend.js';
import { newOwnerId } from './owner-id.js';
import { reenter } from './reentrancy.js';
import { linkSignals, sleepUnlessAborted, unlessAborted } from './signals.util.js';

/** The longest delay a Node timer takes (longer ones fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What an acquisition uses of the engine. */
export interface AcquisitionDeps {
  readonly backends: ReadonlyMap<string, LockBackend>;
  readonly context: LeaseContext;
  readonly registry: LeaseRegistry;
  readonly events: LockEvents;
  readonly grants: LeaseGrants;
  /** Attempts and waits that close() waits for. */
  readonly inFlight: InFlight;
  /** Aborts when shutdown begins: every call still waiting for a lock stops waiting. */
  readonly stopping: AbortSignal;
  shuttingDown(): boolean;
  readonly driftFactor: number;
}

export function shutdownError(o: LockRequest): LockBackendUnavailableError {
  return new LockBackendUnavailableError(o.backend, 'acquire', 'the application is shutting down', { key: o.key });
}

/**
 * The acquisition loop: a fresh owner id per attempt, validity counted from each attempt's send
 * time on the monotonic clock, waiting in the backend's queue until the caller's wait runs out,
 * and a give-back of whatever an attempt may have left (a queue place, a late grant) — owner-
 * checked, as work close() waits for.
 */
export class Acquisition {
  /** The waiting of a call with no signal of its own, not nested in a lease: it stops at shutdown only. */
  private readonly stoppingOnly: { readonly signal: AbortSignal; dispose(): void };

  constructor(private readonly deps: AcquisitionDeps) {
    this.stoppingOnly = { signal: deps.stopping, dispose: () => undefined };
  }

  async take(o: LockRequest, throwWhenBusy: boolean): Promise<Lease | null> {
    o.signal?.throwIfAborted();
    // Synchronous unless the outer lease must be raised first: a call that does not re-enter goes
    // on at once (an acquisition started just before a release of the key must queue before it).
    const reentered = reenter(o, this.deps.context, this.deps.grants);
    if (reentered) return reentered;
    const backend = this.backendFor(o);
    if (this.deps.shuttingDown()) throw shutdownError(o);
    // Waiting stops at the caller's signal, when shutdown begins, or when a lease this call is
    // nested in is lost (its work is unprotected now) — whichever comes first.
    const enclosing = this.deps.context.leases();
    // Most calls have no signal of their own and are not nested: shutdown alone, nothing to link.
    const waiting = o.signal || enclosing.length > 0 ? linkSignals([o.signal, this.deps.stopping, ...enclosing.map((lease) => lease.signal)]) : this.stoppingOnly;
    // A release of this key by this process still in flight (a re-subscription, a loop) goes
    // first: otherwise our own lock would look busy to us.
    if (o.keys) {
      for (const key of o.keys) {
        const pending = this.deps.registry.pendingRelease(o.backend, key);
        if (pending) await pending;
      }
    } else {
      const pending = this.deps.registry.pendingRelease(o.backend, o.key);
      if (pending) await pending;
    }
    let owner = newOwnerId();
    // A loss the backend reports for this owner before the grant is known here (a force-release
    // whose notice overtakes the answer; a key of a multi-key attempt lost while it takes the
    // others) is kept for the grant, not dropped for want of a lease.
    let attempt = this.deps.registry.attempting(owner);
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
    // (No closures over this call's state: a bare acquire allocates none. giveBack() gives back
    // what `owner` may hold or queue for; renewed() starts over as a new owner, so that a clean-up
    // of the old one still in flight never touches the new one's keys.)
    try {
      for (;;) {
        if (attempt.lost) {
          // A key this attempt had taken was lost while it waited for another: start over.
          await this.giveBack(backend, o.key, owner);
          owner = this.renewed(owner);
          attempt = this.deps.registry.attempting(owner);
          queued = false;
        }
        const sentAt = monotonicNow();
        // The server keeps the key for ttl + lockDelay; we trust it for ttl (minus drift).
        const answer = this.deps.inFlight.track(backend.acquire({ key: o.key, owner, ttlMs: o.ttl + o.policy.lockDelay, validityMs: o.ttl, queue, reportHolder: throwWhenBusy }));
        // A caller's signal stops the wait for the answer too; whatever the answer turns out to be
        // (a grant, a queue place) is given back, owner-checked, when it comes.
        const result = waiting === this.stoppingOnly ? await answer : await this.unlessAborted(answer, waiting.signal, backend, o.key, owner);
        if (result.acquired) {
          if (this.deps.shuttingDown()) {
            // Shutdown began while we asked: no work may start now. Give the key straight back.
            await this.giveBack(backend, o.key, owner);
            queued = false;
            throw shutdownError(o);
          }
          if (attempt.lost) {
            // Granted, but the backend said meanwhile that a key of it is gone: not a lease.
            await this.giveBack(backend, o.key, owner);
            owner = this.renewed(owner);
            attempt = this.deps.registry.attempting(owner);
            queued = false;
            if (monotonicNow() >= deadline) break;
            continue;
          }
          const p = result.provisional;
          const until = p
            ? validUntil(p.validFrom, Math.min(p.validForMs, o.ttl), this.deps.driftFactor)
            : validUntil(sentAt, o.ttl, this.deps.driftFactor);
          if (until > monotonicNow()) {
            const lease = this.deps.grants.grant(o, backend, owner, result.token, until, sentAt - started);
            if (p?.confirmed) LEASE_INTERNALS.core(lease).confirmWith(p.confirmed);
            return lease;
          }
          // The answer came after the lease would already have ended: it cannot be trusted. Give
          // it up, and retry as a NEW owner.
          await this.giveBack(backend, o.key, owner);
          owner = this.renewed(owner);
          attempt = this.deps.registry.attempting(owner);
          queued = false;
          // A backend slower than the ttl is not hammered: back off, 10 ms doubling to 1 s.
          const pause = Math.min(1_000, 10 * 2 ** lateAnswers++);
          if (monotonicNow() + pause >= deadline) {
            throw new LockBackendUnavailableError(o.backend, 'acquire', `the answer took longer than the ${o.ttl} ms ttl`, { key: o.key });
          }
          await sleepUnlessAborted(pause, waiting.signal);
          continue;
        }
        if (queue && !waited) waited = this.deps.inFlight.open();
        queued ||= queue;
        holderRemainingMs = result.holderRemainingMs;
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) break;
        // Stopped meanwhile (shutdown, the caller's signal): no wait that a backend might not cut short.
        waiting.signal.throwIfAborted();
        // A campaign waits without end: one timer's longest span at a time.
        await backend.waitForTurn(o.key, owner, Math.min(remaining, MAX_TIMER_MS), waiting.signal);
      }
      if (queued) await this.giveBack(backend, o.key, owner);
    } catch (error) {
      if (queued) await this.giveBack(backend, o.key, owner);
      if (this.deps.stopping.aborted && error === this.deps.stopping.reason) throw shutdownError(o);
      throw error;
    } finally {
      waiting.dispose();
      this.deps.registry.attempted(owner);
      waited?.();
    }
    const waitedMs = monotonicNow() - started;
    this.deps.events.emit('busy', { key: o.key, purpose: o.purpose, backend: o.backend, kind: kindOf(o), waitedMs });
    if (!throwWhenBusy) return null;
    throw new LockBusyError(o.key, o.purpose, o.backend, queue ? waitedMs : 0, holderRemainingMs);
  }

  /** Give back what `owner` may hold or queue for (owner-checked), as work close() waits for. */
  private giveBack(backend: LockBackend, key: string, owner: string): Promise<unknown> {
    return this.deps.inFlight.track(backend.release(key, owner).catch(() => undefined));
  }

  /** `owner`'s attempt is over: the owner id of the next one. */
  private renewed(owner: string): string {
    this.deps.registry.attempted(owner);
    return newOwnerId();
  }

  /** `answer`, or the signal's reason once it aborts: what the answer grants or queues is then given back. */
  private unlessAborted(answer: Promise<AcquireResult>, signal: AbortSignal, backend: LockBackend, key: string, owner: string): Promise<AcquireResult> {
    return unlessAborted(answer, signal, () => void this.giveBack(backend, key, owner));
  }

  /**
   * The backend of a request: as a semaphore's holders see it when it asks for more than one permit,
   * as a reader sees it for a read-write lock's reader; for several keys, a MultiKeyBackend of its
   * own (all or nothing, taken in sorted order, every key in the request's mode).
   */
  private backendFor(o: LockRequest): LockBackend {
    const backend = this.deps.backends.get(o.backend)!;
    const mode = o.mode ?? 'write';
    if (o.keys) return new MultiKeyBackend(withMode(backend, mode), o.keys);
    if (mode !== 'write') return withMode(backend, mode);
    return o.permits > 1 ? withPermits(backend, o.permits) : backend;
  }
}
