import type { AcquireRequest, AcquireResult, HeldLock, ReadMode, UpgradeResult } from '../lock-backend.interface.js';
import type { TurnWaiters } from '../wait-turn.util.js';
import type { MemoryLockHolder } from './memory-semaphore.js';

/** One reader of a key: its hold, and whether it is the key's upgradeable read. */
export interface MemoryReader extends MemoryLockHolder {
  upgradeable: boolean;
}

/** The parts of a memory backend its read-write locks run on: the plain lock's writer and line. */
export interface MemoryReadWriteStore {
  /** Each key's line: owners in arrival order, writers (plain locks) and readers alike. */
  readonly queues: Map<string, string[]>;
  readonly turns: TurnWaiters;
  nextToken(): bigint;
  /** The key's writer (its plain holder), if one holds it now. */
  liveHolder(key: string, now: number): MemoryLockHolder | undefined;
  /** Make `holder` the key's writer (an upgraded read). */
  setWriter(key: string, holder: MemoryLockHolder): void;
}

/**
 * The in-memory backend's read-write locks. A writer is the plain lock (the backend's holder of
 * the key); readers are kept here. Writers and readers of a key wait in one line, the plain
 * lock's, in arrival order: a waiter may hold once nobody it conflicts with holds the key and
 * everyone ahead of it in line could hold beside it — so readers that come while a writer waits
 * queue behind it, and consecutive readers at the head are let in together.
 */
export class MemoryReadWrite {
  /** key → its readers (owner → hold). */
  private readonly readers = new Map<string, Map<string, MemoryReader>>();
  /** A waiting owner's mode; absent for a writer. `'upgrade'`: an upgradeable holder in upgrade(). */
  private readonly waiting = new Map<string, ReadMode | 'upgrade'>();

  constructor(private readonly store: MemoryReadWriteStore) {}

  /** See LockBackend.bookkeeping. */
  bookkeeping(): Record<string, string[]> {
    return { readers: [...this.readers.keys()], waitingModes: [...this.waiting.keys()] };
  }

  /** The key's readers now (expired ones dropped), or undefined when none holds it. */
  liveReaders(key: string, now: number): Map<string, MemoryReader> | undefined {
    const readers = this.readers.get(key);
    if (!readers) return undefined;
    for (const [owner, reader] of readers) if (reader.expiresAt <= now) readers.delete(owner);
    if (readers.size > 0) return readers;
    this.readers.delete(key);
    return undefined;
  }

  /** Keys some reader holds now. */
  heldKeys(now: number): string[] {
    return [...this.readers.keys()].filter((key) => this.liveReaders(key, now));
  }

  /**
   * Whether `owner` may hold `key` in `mode` now: no writer holds it, no reader holds it when
   * `mode` is `'write'`, at most one upgradeable read, and everyone ahead of `owner` in line (all
   * of the line for a newcomer) is a reader that could hold beside it.
   */
  admissible(key: string, owner: string, mode: ReadMode | 'write', now: number): boolean {
    if (this.store.liveHolder(key, now)) return false;
    const readers = this.liveReaders(key, now);
    const line = this.store.queues.get(key) ?? [];
    const place = line.indexOf(owner);
    const ahead = place >= 0 ? place : line.length;
    if (mode === 'write') return readers === undefined && ahead === 0;
    let upgradeable = readers !== undefined && [...readers.values()].some((reader) => reader.upgradeable);
    for (let i = 0; i < ahead; i++) {
      const other = this.waiting.get(line[i]);
      // A writer waits ahead; or an upgrade, while its owner still reads (wakeAdmissible drops a stale one).
      if (other === undefined || (other === 'upgrade' && readers?.has(line[i]))) return false;
      if (other === 'upgrade') continue;
      if (other === 'upgradeable') {
        if (upgradeable) return false;
        upgradeable = true;
      }
    }
    return mode === 'read' || !upgradeable;
  }

  acquire({ key, owner, ttlMs, queue, mode: readMode }: AcquireRequest & { readonly mode: ReadMode }): AcquireResult {
    const now = performance.now();
    const mine = this.liveReaders(key, now)?.get(owner);
    if (mine) return { acquired: true, token: mine.token };
    if (this.admissible(key, owner, readMode, now)) {
      this.leaveLine(key, owner);
      this.store.turns.forget(owner);
      const token = this.store.nextToken();
      let readers = this.readers.get(key);
      if (!readers) this.readers.set(key, (readers = new Map()));
      readers.set(owner, { owner, expiresAt: now + ttlMs, token, grantedAt: now, upgradeable: readMode === 'upgradeable' });
      // Readers right behind it in line may hold beside it.
      this.wakeAdmissible(key, now);
      return { acquired: true, token };
    }
    const line = this.store.queues.get(key) ?? [];
    if (queue && !line.includes(owner)) {
      this.store.turns.track(owner);
      line.push(owner);
      this.store.queues.set(key, line);
      this.waiting.set(owner, readMode);
    }
    return { acquired: false, holderRemainingMs: this.soonestEndMs(key, now) };
  }

  /** How long until some holder of `key` (its writer or a reader) ends, ms; undefined when none does. */
  soonestEndMs(key: string, now: number): number | undefined {
    const ends = [...(this.liveReaders(key, now)?.values() ?? [])].map((reader) => reader.expiresAt);
    const writer = this.store.liveHolder(key, now);
    if (writer) ends.push(writer.expiresAt);
    return ends.length > 0 ? Math.ceil(Math.min(...ends) - now) : undefined;
  }

  extend(key: string, owner: string, ttlMs: number): boolean {
    const reader = this.liveReaders(key, performance.now())?.get(owner);
    if (!reader) return false;
    reader.expiresAt = performance.now() + ttlMs;
    return true;
  }

  /** Give up `owner`'s read of `key` and its place in line (a waiting upgrade too); wake who may hold now. */
  release(key: string, owner: string): boolean {
    const now = performance.now();
    this.leaveLine(key, owner);
    this.store.turns.forget(owner);
    const readers = this.liveReaders(key, now);
    const wasOwner = readers?.delete(owner) ?? false;
    if (readers?.size === 0) this.readers.delete(key);
    this.wakeAdmissible(key, now);
    return wasOwner;
  }

  upgrade(key: string, owner: string, ttlMs: number): UpgradeResult {
    const now = performance.now();
    const readers = this.liveReaders(key, now);
    const me = readers?.get(owner);
    if (!readers || !me?.upgradeable) {
      this.leaveLine(key, owner);
      this.store.turns.forget(owner);
      this.wakeAdmissible(key, now);
      return { upgraded: false, held: false };
    }
    if (readers.size === 1) {
      this.readers.delete(key);
      this.leaveLine(key, owner);
      this.store.turns.forget(owner);
      const token = this.store.nextToken();
      this.store.setWriter(key, { owner, expiresAt: now + ttlMs, token, grantedAt: me.grantedAt });
      return { upgraded: true, token };
    }
    // Other readers hold it: wait first in line, ahead of every waiter.
    const line = this.store.queues.get(key) ?? [];
    if (line[0] !== owner) {
      const place = line.indexOf(owner);
      if (place >= 0) line.splice(place, 1);
      line.unshift(owner);
      this.store.queues.set(key, line);
      this.waiting.set(owner, 'upgrade');
      this.store.turns.track(owner);
    }
    return { upgraded: false, held: true };
  }

  /** Wake every waiter at the head of `key`'s line that may hold now (a writer alone, readers together). */
  wakeAdmissible(key: string, now: number): void {
    const line = this.store.queues.get(key);
    if (!line) return;
    for (const owner of [...line]) {
      const mode = this.waiting.get(owner);
      if (mode === 'upgrade') {
        const readers = this.liveReaders(key, now);
        if (!readers?.has(owner)) {
          // Its owner reads no more (expired, force-released): nothing to wait for; told, it stops.
          this.leaveLine(key, owner);
          this.store.turns.forget(owner);
          continue;
        }
        if (readers.size === 1) this.store.turns.wake(owner);
        return;
      }
      if (!this.admissible(key, owner, mode ?? 'write', now)) return;
      this.store.turns.wake(owner);
      if (mode === undefined) return;
    }
  }

  /** Every reader of `key` ends (an operator's forceRelease); their owners. */
  dropReaders(key: string, now: number): string[] {
    const readers = this.liveReaders(key, now);
    this.readers.delete(key);
    // A dropped reader's waiting upgrade goes with it (it would hold the head of the line).
    for (const owner of readers?.keys() ?? []) {
      if (this.waiting.get(owner) !== 'upgrade') continue;
      this.leaveLine(key, owner);
      this.store.turns.forget(owner);
    }
    this.wakeAdmissible(key, now);
    return readers ? [...readers.keys()] : [];
  }

  /** `key`'s readers as `inspect()` reports them: the reader whose hold ends last, and the count. */
  inspect(key: string, now: number): HeldLock | null {
    const readers = this.liveReaders(key, now);
    if (!readers) return null;
    const last = [...readers.values()].reduce((a, b) => (b.expiresAt > a.expiresAt ? b : a));
    return {
      remainingMs: Math.max(0, Math.ceil(last.expiresAt - now)),
      // Callers queued: a reader's own waiting upgrade is not one.
      waiters: (this.store.queues.get(key) ?? []).filter((owner) => this.waiting.get(owner) !== 'upgrade').length,
      token: last.token,
      heldForMs: Math.max(0, Math.floor(now - last.grantedAt)),
      mode: 'read',
      readers: readers.size,
    };
  }

  /** Forget every reader and waiting mode (the testing backend's reset()); waiting upgrades are told. */
  clear(): void {
    for (const [owner, mode] of this.waiting) if (mode === 'upgrade') this.store.turns.forget(owner);
    this.readers.clear();
    this.waiting.clear();
  }

  private leaveLine(key: string, owner: string): void {
    this.waiting.delete(owner);
    const line = this.store.queues.get(key);
    if (!line) return;
    const place = line.indexOf(owner);
    if (place >= 0) line.splice(place, 1);
    if (line.length === 0) this.store.queues.delete(key);
  }
}
