import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener, HoldKind, UpgradeResult } from '../lock-backend.interface.js';
import { LossListeners } from '../loss-listeners.js';
import { MEMORY_CAPABILITIES } from './memory-backend.options.js';
import { TurnWaiters } from '../wait-turn.util.js';
import { permitsMismatch, permitsOf } from '../semaphore.util.js';
import { inspectSemaphore, liveSemaphore, MemorySemaphores, type MemoryLockHolder, type MemorySemaphoreState, type MemoryStore } from './memory-semaphore.js';
import { MemoryReadWrite } from './memory-read-write.js';

export type { MemoryLockHolder } from './memory-semaphore.js';

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
  protected readonly semaphores = new Map<string, MemorySemaphoreState>();
  private lastToken = 0n;
  private readonly lossListeners = new LossListeners();

  constructor(readonly name = 'memory') {}

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  /** This backend's semaphores (requests with `permits` ≥ 2), sharing its keys, queues and token counter. */
  private readonly semaphoreStore = new MemorySemaphores({
    queues: this.queues,
    semaphores: this.semaphores,
    turns: this.turns,
    nextToken: () => ++this.lastToken,
    // A key its readers hold is held for a semaphore as a plain lock is (they refuse each other).
    liveHolder: (key, now) => this.liveHolder(key, now) ?? this.readWrite.liveReaders(key, now)?.values().next().value,
    gate: (operation, key) => this.gate(operation, key),
  });

  /** This backend's read-write locks' readers (a writer is the plain holder), sharing its lines and token counter. */
  protected readonly readWrite: MemoryReadWrite = new MemoryReadWrite({
    queues: this.queues,
    turns: this.turns,
    nextToken: () => ++this.lastToken,
    liveHolder: (key, now) => this.liveHolder(key, now),
    setWriter: (key, holder) => void this.holders.set(key, holder),
  });

  /** See LockBackend.bookkeeping: the store itself (keys held, lines, semaphores) and the waiters. */
  bookkeeping(): Record<string, string[]> {
    const { holders, queues, semaphores, turns } = this;
    return { holders: [...holders.keys()], queues: [...queues.keys()], semaphores: [...semaphores.keys()], turns: turns.owners(), ...this.readWrite.bookkeeping() };
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    if (permitsOf(request) > 1) return this.semaphoreStore.acquire(request);
    const { key, owner, ttlMs, queue, mode } = request;
    const now = performance.now();
    if (this.semaphores.size > 0) {
      const semaphore = this.liveSemaphore(key, now);
      if (semaphore) throw permitsMismatch(key, semaphore.permits, 1);
    }
    if (mode) return this.readWrite.acquire({ ...request, mode });
    const holder = this.liveHolder(key, now);
    const waiting = this.queues.get(key) ?? [];
    if (!holder && this.readWrite.admissible(key, owner, 'write', now)) {
      if (waiting[0] === owner) this.dequeue(key, owner);
      this.turns.forget(owner);
      const token = ++this.lastToken;
      this.holders.set(key, { owner, expiresAt: now + ttlMs, token, grantedAt: now });
      return { acquired: true, token };
    }
    if (queue && !waiting.includes(owner)) {
      this.turns.track(owner);
      waiting.push(owner);
      this.queues.set(key, waiting);
    }
    if (!holder) this.readWrite.wakeAdmissible(key, now);
    return { acquired: false, holderRemainingMs: this.readWrite.soonestEndMs(key, now) };
  }

  waitForTurn(key: string, owner: string, timeoutMs: number, signal?: AbortSignal, hold?: HoldKind): Promise<void> {
    if (permitsOf(hold) > 1) return this.semaphoreStore.waitForTurn(key, owner, timeoutMs, signal);
    // A holder (the writer, or a reader) that never releases still frees the key at expiry: look again then.
    const soonest = this.readWrite.soonestEndMs(key, performance.now());
    const untilExpiry = soonest !== undefined ? soonest + 1 : timeoutMs;
    return this.turns.wait(owner, Math.min(timeoutMs, untilExpiry), signal);
  }

  async extend(key: string, owner: string, ttlMs: number, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphoreStore.extend(key, owner, ttlMs);
    if (hold?.mode) return this.readWrite.extend(key, owner, ttlMs);
    const holder = this.liveHolder(key, performance.now());
    if (holder?.owner !== owner) return false;
    holder.expiresAt = performance.now() + ttlMs;
    return true;
  }

  async release(key: string, owner: string, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphoreStore.release(key, owner);
    if (hold?.mode) return this.readWrite.release(key, owner);
    this.dequeue(key, owner);
    this.turns.forget(owner);
    const now = performance.now();
    const holder = this.liveHolder(key, now);
    const wasOwner = holder?.owner === owner;
    if (wasOwner) this.holders.delete(key);
    this.readWrite.wakeAdmissible(key, now);
    return wasOwner;
  }

  async upgrade(key: string, owner: string, ttlMs: number): Promise<UpgradeResult> {
    await this.gate('upgrade', key);
    return this.readWrite.upgrade(key, owner, ttlMs);
  }

  async inspect(key: string): Promise<HeldLock | null> {
    const now = performance.now();
    const holder = this.liveHolder(key, now);
    if (!holder) return this.readWrite.inspect(key, now) ?? (this.semaphores.size > 0 ? inspectSemaphore(this.semaphores, key) : null);
    return {
      mode: 'write',
      remainingMs: Math.max(0, Math.ceil(holder.expiresAt - now)),
      waiters: this.queues.get(key)?.length ?? 0,
      token: holder.token,
      heldForMs: Math.max(0, Math.floor(now - holder.grantedAt)),
      owner: holder.owner,
    };
  }

  async listKeys(prefix: string, max: number): Promise<string[]> {
    await this.gate('listKeys', prefix);
    const now = performance.now();
    const names: string[] = [];
    for (const key of new Set([...this.holders.keys(), ...this.semaphores.keys(), ...this.readWrite.heldKeys(now)])) {
      if (names.length >= max) break;
      if (key.startsWith(prefix) && (this.liveHolder(key, now) || this.readWrite.liveReaders(key, now) || (this.liveSemaphore(key, now)?.holders.size ?? 0) > 0)) names.push(key);
    }
    return names;
  }

  async forceRelease(key: string): Promise<string | undefined> {
    return this.takeAway(key, 'ended by forceRelease()', 'force-released');
  }

  /** Runs before each semaphore operation; nothing here (the testing backend's controls). */
  protected async gate(_operation: string, _key: string): Promise<void> {}

  /** Always answers: it lives in this process. */
  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.holders.clear();
    this.queues.clear();
    this.semaphores.clear();
    this.readWrite.clear();
  }

  /**
   * End `key`'s hold whoever holds it (every holder of a semaphore), wake the next waiters, tell
   * the holders' engines: an owner whose hold ended, or undefined when free.
   */
  protected takeAway(key: string, detail: string, reason: 'expired' | 'not-owner' | 'force-released'): string | undefined {
    const semaphore = this.liveSemaphore(key, performance.now());
    if (semaphore && semaphore.holders.size > 0) {
      const owners = [...semaphore.holders.keys()];
      semaphore.holders.clear();
      for (const owner of semaphore.queue.slice(0, semaphore.permits)) this.turns.wake(owner);
      this.liveSemaphore(key, performance.now());
      for (const owner of owners) this.lossListeners.tell(owner, detail, reason);
      return owners[0];
    }
    const now = performance.now();
    const readers = this.readWrite.dropReaders(key, now);
    if (readers.length > 0) {
      for (const owner of readers) this.lossListeners.tell(owner, detail, reason);
      return readers[0];
    }
    const holder = this.liveHolder(key, now);
    if (!holder) return undefined;
    this.holders.delete(key);
    this.readWrite.wakeAdmissible(key, now);
    this.lossListeners.tell(holder.owner, detail, reason);
    return holder.owner;
  }

  /** Every semaphore holder's owner; the semaphores forgotten. */
  protected dropSemaphores(): string[] {
    const owners = [...this.semaphores.values()].flatMap((state) => [...state.holders.keys()]);
    this.semaphores.clear();
    return owners;
  }

  /** Tell the holders' engines that these owners' leases are gone. */
  protected tellLost(owners: string[], detail: string, reason: 'expired' | 'not-owner'): void {
    for (const owner of owners) this.lossListeners.tell(owner, detail, reason);
  }

  protected liveSemaphore(key: string, now: number): MemorySemaphoreState | undefined {
    return this.semaphores.size > 0 ? liveSemaphore(this.semaphores, key, now) : undefined;
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
