import type { AcquireRequest, AcquireResult, LockBackend } from '../backends/lock-backend.interface.js';

/** One acquisition's progress: the keys it holds so far (a prefix of the sorted list). */
interface Progress {
  held: string[];
  tokens: Array<bigint | undefined>;
  /** When the held keys were last given their full ttl (monotonic ms), and that ttl. */
  refreshedAt: number;
  ttlMs: number;
}

/**
 * One lease over several keys of one backend, all or nothing, for one acquisition (the engine
 * makes one per multi-key request; the LeaseCore then extends and releases through it).
 *
 * No deadlock between callers naming the same keys in any order: keys are taken in one global
 * order (sorted), each by the backend's own acquire and queue, so a caller only ever waits for a
 * key while holding keys that sort before it — no cycle of waits can form. A backend that can take
 * several keys in one step (`acquireAll`: a Redis script, an etcd txn) is asked first; when any key
 * is busy, nothing is left held and the ordered path queues on the first busy key.
 *
 * While waiting for a later key the earlier ones are kept alive (their ttl renewed every ttl/3);
 * when the last key comes, every key but that last one is asked for again on the server (an owner-
 * checked extend to its full ttl), so a key lost on the way is found before the lease is granted
 * and the engine's validity (counted from the attempt's send time) holds for all of them. A key
 * found lost on the way (expired, force-released) restarts from nothing; so does a loss the backend
 * reports for one of the attempt's keys (the engine keeps such a notice until the grant).
 * Each key is held by an owner id of its own, `<owner>.<generation>-<index>`: a backend keeps one
 * hold per owner (a znode, a Redlock attempt), and a key's loss reported for it reaches the lease
 * (the engine's registry strips everything from the first dot; engine owner ids never contain
 * one). A restart gives back every key of the generation — held or queued for, so no stale queue
 * place of ours can keep a key reserved while we wait for an earlier one — and starts a new
 * generation: a clean-up of the old one still in flight never touches the new one's keys.
 * The lease's token is the largest of the keys' tokens: fencing backends number grants on one
 * global counter (etcd revision, PostgreSQL sequence, ZooKeeper zxid), so it is larger than every
 * earlier holder's token of each of the keys.
 */
/** Requests at once per operation over a lease's keys: a thousand deletes at once time out on etcd. */
const BATCH = 64;

/** `fn` over `items`, at most BATCH in flight at a time; the results in order. */
async function inBatches<T, R>(items: readonly T[], fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let start = 0; start < items.length; start += BATCH) {
    results.push(...(await Promise.all(items.slice(start, start + BATCH).map((item, j) => fn(item, start + j)))));
  }
  return results;
}

/** The owner id of key `index` of a multi-key lease held by `owner`, in its `generation`. */
export const ownerOf = (owner: string, generation: number, index: number): string => `${owner}.${generation}-${index}`;

export class MultiKeyBackend implements LockBackend {
  readonly name: string;
  readonly capabilities: LockBackend['capabilities'];
  private readonly progress = new Map<string, Progress>();
  /** Per owner, how many times its acquisition started over (see ownerOf). */
  private readonly generations = new Map<string, number>();
  /**
   * Owners released (given up) while an attempt of theirs may still be running: a key granted to
   * it after the release is given back at once, under the generation it was granted in. (The
   * generation is kept: forgetting it would name that key's owner wrongly, and nobody would
   * release it. This object lives for one request, so nothing here grows.)
   */
  private readonly released = new Set<string>();

  constructor(
    private readonly inner: LockBackend,
    /** Sorted, distinct, at least two. */
    readonly keys: readonly string[],
  ) {
    this.name = inner.name;
    this.capabilities = inner.capabilities;
    // A key the backend can never hold is bad input for the whole call, before any key is taken.
    if (inner.checkKey) for (const key of keys) inner.checkKey(key);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    try {
      return await this.attempt(request);
    } catch (error) {
      // Unreachable, refused (a semaphore on a key): the keys taken so far go back now, not at their ttl.
      const p = this.progress.get(request.owner);
      if (p) await this.restart(request.owner, p);
      throw error;
    }
  }

  private async attempt(request: AcquireRequest): Promise<AcquireResult> {
    const { owner } = request;
    const started = performance.now();
    let p = this.progress.get(owner);
    if (!p) {
      if (this.inner.acquireAll) {
        const all = await this.inner.acquireAll(this.keys, this.keys.map((_, i) => this.idOf(owner, i)), request.ttlMs);
        if (all.acquired && this.released.has(owner)) {
          await inBatches(this.keys, (key, i) => this.inner.release(key, this.idOf(owner, i)).catch(() => undefined));
          return { acquired: false };
        }
        if (all.acquired) return all;
      }
      p = { held: [], tokens: [], refreshedAt: performance.now(), ttlMs: request.ttlMs };
      this.progress.set(owner, p);
    } else if (p.held.length > 0 && performance.now() - p.refreshedAt >= request.ttlMs / 3) {
      // Waited a while for a later key: keep the earlier ones (or start over if one is gone).
      if (!(await this.refresh(p, owner, request.ttlMs))) return this.restart(owner, p);
    }
    const grantedBefore = p.held.length;
    let lastDirect = false;
    for (let i = p.held.length; i < this.keys.length; i++) {
      const result = await this.inner.acquire({ ...request, key: this.keys[i], owner: this.idOf(owner, i) });
      if (this.released.has(owner)) {
        // Given up while this key was asked for: the release ran before this grant, so it goes now.
        if (result.acquired) await this.inner.release(this.keys[i], this.idOf(owner, i)).catch(() => undefined);
        return { acquired: false };
      }
      if (!result.acquired) {
        // A single try (no queue) leaves nothing behind.
        if (!request.queue) await this.restart(owner, p, true);
        return { acquired: false, holderRemainingMs: result.holderRemainingMs };
      }
      lastDirect = !result.provisional;
      if (result.provisional) {
        // A hand-off: the key is ours once its claim has landed (it may turn out not to be).
        if (result.provisional.confirmed && (await result.provisional.confirmed) === undefined) {
          await this.inner.release(this.keys[i], this.idOf(owner, i)).catch(() => undefined);
          return this.restart(owner, p);
        }
      }
      p.held.push(this.keys[i]);
      p.tokens.push(result.token);
    }
    // Every key taken before the last may be gone by now — force-released, or expired with its
    // session while we waited — and a loss notice can come late or not at all: the server is
    // asked. Each gets its full ttl again, after this attempt's send time (from which the engine
    // counts the lease's validity). Only the last key, granted directly just now, is known fresh.
    const fresh = lastDirect && p.held.length > grantedBefore ? 1 : 0;
    // An attempt that took longer than the lease's validity is no grant whatever the server says
    // (the engine counts validity from before this attempt and gives such an answer back as too
    // late): answering it saves a refresh that would only find the first keys expired.
    const tooLate = performance.now() - started >= (request.validityMs ?? request.ttlMs);
    if (!tooLate && p.held.length - fresh > 0 && !(await this.refresh(p, owner, request.ttlMs, p.held.length - fresh))) return this.restart(owner, p);
    this.progress.delete(owner);
    const tokens = p.tokens;
    const token = tokens.every((t) => t !== undefined) ? tokens.reduce((a, b) => (b! > a! ? b : a)) : undefined;
    return token === undefined ? { acquired: true } : { acquired: true, token };
  }

  /** Give the first `count` held keys (default: all) their full ttl; false if one of them is no longer ours. */
  private async refresh(p: Progress, owner: string, ttlMs: number, count = p.held.length): Promise<boolean> {
    const sent = performance.now();
    const kept = await inBatches(p.held.slice(0, count), (key, i) => this.inner.extend(key, this.idOf(owner, i), ttlMs));
    p.refreshedAt = sent;
    return kept.every(Boolean);
  }

  /**
   * Give back every key of this generation (held or queued for; `onlyHeld`: a single try, which
   * queued for none), and begin again from the first key in a new generation.
   */
  private async restart(owner: string, p: Progress, onlyHeld = false): Promise<AcquireResult> {
    this.progress.delete(owner);
    const keys = onlyHeld ? p.held : this.keys;
    await inBatches(keys, (key, i) => this.inner.release(key, this.idOf(owner, i)).catch(() => undefined));
    this.generations.set(owner, (this.generations.get(owner) ?? 0) + 1);
    return { acquired: false };
  }

  private idOf(owner: string, index: number): string {
    return ownerOf(owner, this.generations.get(owner) ?? 0, index);
  }

  /** Wait on the key this acquisition queues for — at most ttl/3 while it holds earlier keys. */
  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const p = this.progress.get(owner);
    if (!p) return Promise.resolve();
    const waitingFor = this.keys[p.held.length];
    const keepAlive = p.held.length > 0 ? Math.max(1, p.refreshedAt + p.ttlMs / 3 - performance.now()) : timeoutMs;
    return this.inner.waitForTurn(waitingFor, this.idOf(owner, p.held.length), Math.min(timeoutMs, keepAlive), signal);
  }

  /** Every key kept `ttlMs` more; false if any of them is no longer this owner's. */
  async extend(_key: string, owner: string, ttlMs: number): Promise<boolean> {
    const kept = await inBatches(this.keys, (key, i) => this.inner.extend(key, this.idOf(owner, i), ttlMs));
    return kept.every(Boolean);
  }

  /**
   * Give back every key (and leave any queue): each release is owner-checked, so a key this owner
   * never got — or lost to another holder — is left alone. true if it held any of them.
   */
  async release(_key: string, owner: string): Promise<boolean> {
    this.progress.delete(owner);
    this.released.add(owner);
    const ids = this.keys.map((_, i) => this.idOf(owner, i));
    const results = await inBatches(this.keys, (key, i) =>
      this.inner.release(key, ids[i]).then((value) => ({ status: 'fulfilled' as const, value }), (reason: unknown) => ({ status: 'rejected' as const, reason })),
    );
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return results.some((r) => r.status === 'fulfilled' && r.value);
  }

  /**
   * The earliest of the keys' own bounds (their owners' sessions). A backend that bounds its holds
   * vouches for none of a key it reports no bound for (not held, its session lost): then nothing.
   */
  validUntil(owner: string): number | undefined {
    if (!this.inner.validUntil) return undefined;
    let earliest = Number.POSITIVE_INFINITY;
    for (let i = 0; i < this.keys.length; i++) {
      const bound = this.inner.validUntil(this.idOf(owner, i));
      if (bound === undefined) return 0;
      earliest = Math.min(earliest, bound);
    }
    return earliest;
  }


  async close(): Promise<void> {}
}
