import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { LossListeners } from '../loss-listeners.js';
import { MEMORY_CAPABILITIES } from './memory-backend.options.js';
import { TurnWaiters } from '../wait-turn.util.js';

export interface MemoryLockHolder {
  owner: string;
  expiresAt: number;
  token: bigint;
}

/**
 * NOT DISTRIBUTED: locks live in this process only. Same semantics as the real backends
 * (ttl, owner checks, FIFO hand-off, strictly increasing tokens) so users' unit tests exercise
 * their busy and lost paths without servers. Never use it to coordinate replicas.
 */
export class MemoryBackend implements LockBackend {
  readonly capabilities = MEMORY_CAPABILITIES;
  protected readonly holders = new Map<string, MemoryLockHolder>();
  protected readonly queues = new Map<string, string[]>();
  protected readonly turns = new TurnWaiters();
  private lastToken = 0n;
  private readonly lossListeners = new LossListeners();

  constructor(readonly name = 'memory') {}

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  async acquire({ key, owner, ttlMs, queue }: AcquireRequest): Promise<AcquireResult> {
    const now = performance.now();
    const holder = this.liveHolder(key, now);
    const waiting = this.queues.get(key) ?? [];
    if (!holder && (waiting.length === 0 || waiting[0] === owner)) {
      if (waiting[0] === owner) this.dequeue(key, owner);
      this.turns.forget(owner);
      const token = ++this.lastToken;
      this.holders.set(key, { owner, expiresAt: now + ttlMs, token });
      return { acquired: true, token };
    }
    if (queue && !waiting.includes(owner)) {
      this.turns.track(owner);
      waiting.push(owner);
      this.queues.set(key, waiting);
    }
    if (!holder && waiting.length > 0) this.turns.wake(waiting[0]);
    return { acquired: false, holderRemainingMs: holder ? Math.ceil(holder.expiresAt - now) : undefined };
  }

  waitForTurn(key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const holder = this.liveHolder(key, performance.now());
    // A holder that never releases still frees the key at expiry: wake the head then.
    const untilExpiry = holder ? holder.expiresAt - performance.now() + 1 : timeoutMs;
    return this.turns.wait(owner, Math.min(timeoutMs, untilExpiry), signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const holder = this.liveHolder(key, performance.now());
    if (holder?.owner !== owner) return false;
    holder.expiresAt = performance.now() + ttlMs;
    return true;
  }

  async release(key: string, owner: string): Promise<boolean> {
    this.dequeue(key, owner);
    this.turns.forget(owner);
    const holder = this.liveHolder(key, performance.now());
    const wasOwner = holder?.owner === owner;
    if (wasOwner) this.holders.delete(key);
    const next = this.queues.get(key)?.[0];
    if (next && !this.holders.has(key)) this.turns.wake(next);
    return wasOwner;
  }

  async inspect(key: string): Promise<HeldLock | null> {
    const now = performance.now();
    const holder = this.liveHolder(key, now);
    if (!holder) return null;
    return { remainingMs: Math.max(0, Math.ceil(holder.expiresAt - now)), waiters: this.queues.get(key)?.length ?? 0, token: holder.token };
  }

  async forceRelease(key: string): Promise<string | undefined> {
    return this.takeAway(key, 'ended by forceRelease()', 'force-released');
  }

  /** Always answers: it lives in this process. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.holders.clear();
    this.queues.clear();
  }

  /** End `key`'s hold whoever holds it, wake the next waiter, tell the holder's engines: the owner, or undefined when free. */
  protected takeAway(key: string, detail: string, reason: 'expired' | 'not-owner' | 'force-released'): string | undefined {
    const holder = this.liveHolder(key, performance.now());
    if (!holder) return undefined;
    this.holders.delete(key);
    const next = this.queues.get(key)?.[0];
    if (next) this.turns.wake(next);
    this.lossListeners.tell(holder.owner, detail, reason);
    return holder.owner;
  }

  /** Tell the holders' engines that these owners' leases are gone. */
  protected tellLost(owners: string[], detail: string, reason: 'expired' | 'not-owner'): void {
    for (const owner of owners) this.lossListeners.tell(owner, detail, reason);
  }

  protected liveHolder(key: string, now: number): MemoryLockHolder | undefined {
    const holder = this.holders.get(key);
    if (holder && holder.expiresAt <= now) {
      this.holders.delete(key);
      return undefined;
    }
    return holder;
  }

  private dequeue(key: string, owner: string): void {
    const waiting = this.queues.get(key);
    if (!waiting) return;
    const index = waiting.indexOf(owner);
    if (index >= 0) waiting.splice(index, 1);
    if (waiting.length === 0) this.queues.delete(key);
  }
}
