import type { AcquireRequest, AcquireResult, HeldLock } from '../lock-backend.interface.js';
import { permitsMismatch } from '../semaphore.util.js';
import type { TurnWaiters } from '../wait-turn.util.js';
import type { PgQueryConfigLike } from './postgres-client.interface.js';
import { refuseUnstorable } from './postgres-sql.util.js';
import type { BackendStatements } from './postgres-statements.js';

/** The parts of a PostgreSQL backend its semaphores run on: its pool (through `call`), its wake-ups. */
export interface PostgresSemaphoreStore {
  readonly name: string;
  readonly sql: BackendStatements;
  /** Semaphore waiters of this process, woken by the LISTEN session's '!sem <owner>'. */
  readonly turns: TurnWaiters;
  /** A waiter refreshes its queue entry this often; entries live 3× this. */
  readonly heartbeatMs: number;
  readonly closed: () => boolean;
  /**
   * One bounded statement. `cleanup` runs if no answer came in time — and again once a late answer
   * does come (it may still have been applied: a grant nobody uses).
   */
  call(operation: string, key: string, statement: PgQueryConfigLike, values: unknown[], cleanup?: () => void): Promise<Record<string, any>>;
}

/** A semaphore key as `inspect()` reports it (the semInspect statement's row), or null. */
export function semaphoreHeld(row: Record<string, any>): HeldLock | null {
  if (row.token === undefined || row.token === null) return null;
  return {
    remainingMs: Number(row.remaining_ms),
    waiters: Number(row.waiters),
    token: BigInt(row.token as string),
    permits: Number(row.permits),
    holders: Number(row.holders),
  };
}

/**
 * The PostgreSQL backend's semaphores, requests with `permits` ≥ 2 (see postgres-semaphore.sql.ts): every operation
 * one function call under the key's advisory lock. A waiter waits for its '!sem' NOTIFY; without
 * one it asks again at its heartbeat (refreshing its place) or when the earliest holder's permit
 * expires, whichever is first.
 */
export class PostgresSemaphores {
  /** Per queued owner of this process: when the earliest holder's permit ends (performance.now()). */
  private readonly soonest = new Map<string, number>();

  /** Queued owners of this process (see LockBackend.bookkeeping). */
  waitingOwners(): string[] {
    return [...this.soonest.keys()];
  }

  constructor(private readonly store: PostgresSemaphoreStore) {}

  async acquire({ key, owner, ttlMs, queue, permits = 1 }: AcquireRequest): Promise<AcquireResult> {
    refuseUnstorable(key, `${this.store.name} backend, acquire(${JSON.stringify(key)})`);
    // Tracked before the request: its wake-up may arrive before its answer.
    if (queue) this.store.turns.track(owner);
    let row: Record<string, any>;
    try {
      const values = [key, owner, permits, ttlMs, queue, this.store.heartbeatMs * 3];
      row = await this.store.call('acquire', key, this.store.sql.semAcquire, values, () => void this.release(key, owner).catch(() => undefined));
    } catch (error) {
      this.forget(owner);
      throw error;
    }
    if (row.permits !== null && row.permits !== undefined) {
      this.forget(owner);
      throw permitsMismatch(key, Number(row.permits), permits);
    }
    if (row.acquired) {
      this.forget(owner);
      return { acquired: true, token: BigInt(row.token as string) };
    }
    const holderRemainingMs = row.holder_ms === null || row.holder_ms === undefined ? undefined : Number(row.holder_ms);
    if (queue) this.soonest.set(owner, holderRemainingMs === undefined ? Infinity : performance.now() + holderRemainingMs);
    else this.forget(owner);
    return { acquired: false, holderRemainingMs };
  }

  /** Until a '!sem' wake-up, the heartbeat (the queue entry's refresh), or the earliest holder's expiry. */
  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const untilExpiry = (this.soonest.get(owner) ?? Infinity) - performance.now() + 1;
    return this.store.turns.wait(owner, Math.max(0, Math.min(timeoutMs, this.store.heartbeatMs, untilExpiry)), signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const row = await this.store.call('extend', key, this.store.sql.semExtend, [key, owner, ttlMs]);
    return row.held === true;
  }

  async release(key: string, owner: string): Promise<boolean> {
    this.forget(owner);
    try {
      const row = await this.store.call('release', key, this.store.sql.semRelease, [key, owner]);
      return row.held === true;
    } catch (error) {
      // Unanswered: our permit or our place may still be there (a place blocks those behind it
      // until it expires). Owner-checked retries in the background while such a place can live.
      this.retryRelease(key, owner, performance.now() + this.store.heartbeatMs * 3, 100);
      throw error;
    }
  }

  private forget(owner: string): void {
    this.soonest.delete(owner);
    this.store.turns.forget(owner);
  }

  /** Every `delayMs` while `until` is ahead; unref'd timers, none after close(). */
  private retryRelease(key: string, owner: string, until: number, delayMs: number): void {
    if (this.store.closed() || performance.now() + delayMs > until) return;
    setTimeout(() => {
      if (this.store.closed()) return;
      this.store.call('release', key, this.store.sql.semRelease, [key, owner]).catch(() => this.retryRelease(key, owner, until, delayMs));
    }, delayMs).unref();
  }
}
