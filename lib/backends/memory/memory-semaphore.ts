import type { AcquireRequest, AcquireResult, HeldLock } from '../lock-backend.interface.js';
import { permitsMismatch } from '../semaphore.util.js';
import type { TurnWaiters } from '../wait-turn.util.js';

/** One holder of a key (a lock's, or one of a semaphore's): its owner, expiry and token. */
export interface MemoryLockHolder {
  owner: string;
  expiresAt: number;
  token: bigint;
  /** When it was granted (`performance.now()`): `inspect()` reports how long it has held. */
  grantedAt: number;
}

/** One semaphore key: its permits, its holders (owner → expiry and token), its FIFO queue. */
export interface MemorySemaphoreState {
  permits: number;
  holders: Map<string, MemoryLockHolder>;
  queue: string[];
}

/** The parts of a memory backend its semaphores run on (one process, one set of maps). */
export interface MemoryStore {
  readonly queues: Map<string, string[]>;
  readonly semaphores: Map<string, MemorySemaphoreState>;
  readonly turns: TurnWaiters;
  nextToken(): bigint;
  /** Runs before every semaphore operation (the testing backend's outage and delay controls). */
  gate(operation: string, key: string): Promise<void>;
  liveHolder(key: string, now: number): MemoryLockHolder | undefined;
}

/** Drop expired holders and an empty state; the state still in use, or undefined. */
export function liveSemaphore(semaphores: Map<string, MemorySemaphoreState>, key: string, now: number): MemorySemaphoreState | undefined {
  const state = semaphores.get(key);
  if (!state) return undefined;
  for (const [owner, holder] of state.holders) if (holder.expiresAt <= now) state.holders.delete(owner);
  if (state.holders.size === 0 && state.queue.length === 0) {
    semaphores.delete(key);
    return undefined;
  }
  return state;
}

/** The in-memory backend's semaphores (requests with `permits` ≥ 2): at most `permits` holders per key, FIFO, one token counter. */
export class MemorySemaphores {
  constructor(private readonly store: MemoryStore) {}

  async acquire({ key, owner, ttlMs, queue, permits = 1 }: AcquireRequest): Promise<AcquireResult> {
    await this.store.gate('acquire', key);
    const now = performance.now();
    const plain = this.store.liveHolder(key, now);
    if (plain || (this.store.queues.get(key)?.length ?? 0) > 0) throw permitsMismatch(key, 1, permits);
    let state = liveSemaphore(this.store.semaphores, key, now);
    if (state && state.permits !== permits) throw permitsMismatch(key, state.permits, permits);
    state ??= { permits, holders: new Map(), queue: [] };
    this.store.semaphores.set(key, state);
    const mine = state.holders.get(owner);
    if (mine) return { acquired: true, token: mine.token };
    const place = state.queue.indexOf(owner);
    const ahead = place >= 0 ? place : state.queue.length;
    if (state.holders.size + ahead < permits) {
      if (place >= 0) state.queue.splice(place, 1);
      this.store.turns.forget(owner);
      const token = this.store.nextToken();
      state.holders.set(owner, { owner, expiresAt: now + ttlMs, token, grantedAt: now });
      this.wakeAdmissible(state);
      return { acquired: true, token };
    }
    if (queue && place < 0) {
      this.store.turns.track(owner);
      state.queue.push(owner);
    }
    const soonest = Math.min(...[...state.holders.values()].map((h) => h.expiresAt));
    if (state.holders.size === 0 && state.queue.length === 0) this.store.semaphores.delete(key);
    return { acquired: false, holderRemainingMs: Number.isFinite(soonest) ? Math.ceil(soonest - now) : undefined };
  }

  waitForTurn(key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const now = performance.now();
    const state = liveSemaphore(this.store.semaphores, key, now);
    // A holder that never releases still frees its permit at expiry: look again then.
    const soonest = state && state.holders.size > 0 ? Math.min(...[...state.holders.values()].map((h) => h.expiresAt)) - now + 1 : timeoutMs;
    return this.store.turns.wait(owner, Math.min(timeoutMs, soonest), signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    await this.store.gate('extend', key);
    const holder = liveSemaphore(this.store.semaphores, key, performance.now())?.holders.get(owner);
    if (!holder) return false;
    holder.expiresAt = performance.now() + ttlMs;
    return true;
  }

  async release(key: string, owner: string): Promise<boolean> {
    await this.store.gate('release', key);
    this.store.turns.forget(owner);
    const state = liveSemaphore(this.store.semaphores, key, performance.now());
    if (!state) return false;
    const place = state.queue.indexOf(owner);
    if (place >= 0) state.queue.splice(place, 1);
    const wasOwner = state.holders.delete(owner);
    this.wakeAdmissible(state);
    liveSemaphore(this.store.semaphores, key, performance.now());
    return wasOwner;
  }

  /** Wake every waiter a free permit now admits (the first `permits - holders` of the queue). */
  private wakeAdmissible(state: MemorySemaphoreState): void {
    const free = state.permits - state.holders.size;
    for (const owner of state.queue.slice(0, Math.max(0, free))) this.store.turns.wake(owner);
  }
}

/** A semaphore key as `inspect()` reports it: the holder whose hold ends last, and the counts. */
export function inspectSemaphore(semaphores: Map<string, MemorySemaphoreState>, key: string): HeldLock | null {
  const now = performance.now();
  const state = liveSemaphore(semaphores, key, now);
  if (!state || state.holders.size === 0) return null;
  const last = [...state.holders.values()].reduce((a, b) => (b.expiresAt > a.expiresAt ? b : a));
  return {
    remainingMs: Math.max(0, Math.ceil(last.expiresAt - now)),
    waiters: state.queue.length,
    token: last.token,
    heldForMs: Math.max(0, Math.floor(now - last.grantedAt)),
    permits: state.permits,
    holders: state.holders.size,
  };
}
