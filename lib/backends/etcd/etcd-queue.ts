import { LINE_RECHECK_MS } from '../ordered-queue.js';
import { TurnWaiters } from '../wait-turn.util.js';
import type { EtcdClientLike, EtcdWatcherLike } from './etcd-client.interface.js';
import type { EtcdSession } from './etcd-session.js';

/** A queued owner: its key on a session lease, and the one key ahead of it it watches. */
export interface Queued {
  session: EtcdSession;
  key: string;
  /** Create revision of our queue key: our place in line. */
  rev: bigint;
  predecessor?: string;
  watcher?: EtcdWatcherLike;
  /** `watcher` is established on the server (its 'connected' came, no 'disconnected' since). */
  watching?: boolean;
}

/**
 * ... and this often while its watch is not established yet: until then no deletion can reach it.
 * etcd3 sets up one watch at a time per client — behind every other waiter's of this process, and
 * the forced-release watch that a first grant opens — so under load a new watch can take seconds;
 * the key ahead may be gone long before (measured: a 500 ms delay per watch create left a hot
 * key's next holder waiting for its watch, 4 hand-offs in 1.5 s instead of 14).
 */
const UNWATCHED_RECHECK_MS = 100;

/**
 * This process's queued owners on one etcd backend. Each watches only the key just ahead of its
 * own — its deletion is the cue to re-read (FIFO, no thundering herd); the backend does the reads.
 */
export class EtcdQueue {
  private readonly entries = new Map<string, Queued>();
  private readonly turns = new TurnWaiters();

  constructor(
    private readonly client: EtcdClientLike,
    /** Told when an owner leaves a session's queue (the session may be unused now). */
    private readonly left: (session: EtcdSession) => void,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Queued owners and their waiters (see LockBackend.bookkeeping). */
  bookkeeping(): Record<string, string[]> {
    return { queue: [...this.entries.keys()], queueTurns: this.turns.owners() };
  }

  get(owner: string): Queued | undefined {
    return this.entries.get(owner);
  }

  /** `owner` queued behind `predecessor` (undefined: not known yet — a re-check finds it). */
  join(owner: string, entry: Queued, predecessor: string | undefined): void {
    this.entries.set(owner, entry);
    entry.session.waiters.add(owner);
    this.turns.track(owner);
    this.watchPredecessor(owner, entry, predecessor);
  }

  /**
   * `owner` queued for a semaphore whose keys are under `prefix`: a permit frees when ANY entry
   * ahead of ours goes, so it watches the whole range's deletes and is woken by those of an entry
   * created before ours (the previous value tells its create revision); the backend then recounts
   * with one read. Its own entry's delete wakes it too (a forced release, its session's end): the
   * re-check finds it gone and starts over. Like a predecessor's watch it starts "now", and its
   * 'connected' wakes a re-check that covers what went before it was set up (and after a reconnect).
   */
  joinBehind(owner: string, entry: Queued, prefix: string): void {
    this.entries.set(owner, entry);
    entry.session.waiters.add(owner);
    this.turns.track(owner);
    const watcher = this.client.watch().prefix(prefix).only('delete').withPreviousKV().watcher();
    watcher.on('delete', (_kv: unknown, previous?: { create_revision?: string }) => {
      if (previous?.create_revision === undefined || BigInt(previous.create_revision) <= entry.rev) this.turns.wake(owner);
    });
    this.track(owner, entry, watcher);
  }

  /** Watch only the key just ahead of ours; its deletion is our cue (no thundering herd). */
  watchPredecessor(owner: string, entry: Queued, predecessor: string | undefined): void {
    void entry.watcher?.cancel().catch(() => undefined);
    entry.watcher = undefined;
    entry.watching = false;
    entry.predecessor = predecessor;
    if (predecessor === undefined) {
      this.turns.wake(owner);
      return;
    }
    // Watch from "now", not from our enqueue's revision: a watch that starts in the past is an
    // *unsynced* watcher on the server, whose events wait for etcd's background sync loop (every
    // 100 ms) — on a hot key that alone cost ~6 ms per hand-off. A deletion between our enqueue
    // and the watch's start is covered instead by one re-check (a read) once the watch is
    // established, and again after any reconnect.
    const watcher = this.client.watch().key(predecessor).only('delete').watcher();
    watcher.on('delete', () => this.turns.wake(owner));
    this.track(owner, entry, watcher);
  }

  /**
   * `watcher` becomes the entry's: until it is established, the waiter re-reads its place often
   * (see wait()); once it is, a re-read covers what went before; a reconnect starts over.
   */
  private track(owner: string, entry: Queued, watcher: EtcdWatcherLike): void {
    entry.watcher = watcher;
    entry.watching = false;
    watcher.on('connected', () => {
      if (entry.watcher !== watcher) return;
      entry.watching = true;
      this.turns.wake(owner);
    });
    watcher.on('disconnected', () => {
      if (entry.watcher === watcher) entry.watching = false;
    });
    watcher.on('error', () => undefined);
  }

  wake(owner: string): void {
    this.turns.wake(owner);
  }

  wait(owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const entry = this.entries.get(owner);
    const recheckMs = entry?.watcher && !entry.watching ? UNWATCHED_RECHECK_MS : LINE_RECHECK_MS;
    return this.turns.wait(owner, Math.min(timeoutMs, recheckMs), signal);
  }

  drop(owner: string): void {
    const entry = this.entries.get(owner);
    this.turns.forget(owner);
    if (!entry) return;
    this.entries.delete(owner);
    entry.session.waiters.delete(owner);
    void entry.watcher?.cancel().catch(() => undefined);
    this.left(entry.session);
  }

  dropAll(): void {
    for (const owner of [...this.entries.keys()]) this.drop(owner);
  }
}
