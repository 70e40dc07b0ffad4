import type { HeldLock } from '../lock-backend.interface.js';
import type { EtcdClientLike, EtcdWatcherLike } from './etcd-client.interface.js';
import { permitsOf, prefixEnd } from './etcd-requests.util.js';
import { semaphoreWindowRange } from './etcd-semaphore-requests.util.js';

/** How long a forced release's marker lives: long enough for every holder's watch to catch up after a reconnect. */
const MARKER_TTL_SECONDS = 60;

/** One entry of a lock: its key, owner, create revision and session lease. */
interface Holder {
  key: Buffer;
  owner: string;
  createRevision: string;
  /** A plain lock's holder: its token (see EtcdBackend); its create revision while a waiter's grant is being recorded. */
  modRevision: string;
  lease: string;
}

/** etcd's inspect(): the holder's owner id too, so the engine can add a semaphore holder's token when it is local. */
export interface EtcdHeldLock extends HeldLock {
  readonly owner: string;
}

/**
 * An operator's view of one etcd backend's locks. The holder of a lock is its key with the lowest
 * create revision (etcd's recipe); a forced release deletes that key — only if it is still that
 * key, compared by create revision — and, in the same txn, leaves a marker `<prefix>%lost/<owner>`
 * (`%lo` never begins an escape of encodeURIComponent, so no lock key's range holds it) on a
 * short lease. Every process that holds a lock watches the markers (one watch per backend,
 * events only on forced releases) and ends that owner's lease at once.
 *
 * A plain lock's token is its holder key's mod revision, so any process reports it (a
 * semaphore holder's is the revision of the read that admitted it, known to its process only: the
 * engine adds it when the holder is local). What is left of the hold is
 * its session lease's time to live: the engine deletes the key at the lease's own ttl, and the
 * session takes it with it if its process stops.
 */
export class EtcdAdmin {
  private watcher?: EtcdWatcherLike;
  private idleTimer?: NodeJS.Timeout;
  private closed = false;
  private readonly markers: string;

  constructor(
    private readonly client: EtcdClientLike,
    private readonly prefix: string,
    private readonly deadline: () => { deadline: Date },
    private readonly forced: (owner: string) => void,
  ) {
    this.markers = `${prefix}%lost/`;
  }

  /**
   * Watch the markers (once; a process that holds a lock calls it at its grant) from the grant's
   * revision: a forced release comes after it, and a watch set up "from now" would miss one made
   * while the watch was still being set up (a holder farther from etcd than the operator).
   */
  watch(fromRevision: bigint): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.watcher || this.closed) return;
    const watcher = this.client.watch().prefix(this.markers).startRevision(fromRevision.toString()).only('put').watcher();
    watcher.on('put', (kv: { key: Buffer }) => this.forced(kv.key.toString().slice(this.markers.length)));
    watcher.on('error', () => undefined);
    this.watcher = watcher;
  }

  /**
   * A semaphore key (its oldest entry's value says its permits) is reported by the holder whose
   * session lease has the most time left, with the count of holders (the first `permits` entries).
   */
  async inspect(lockPrefix: string, sessionTtlMs: number): Promise<EtcdHeldLock | null> {
    const first = await this.first(lockPrefix);
    if (!first) return null;
    if (first.permits === 1) {
      return { owner: first.owner, token: BigInt(first.modRevision), remainingMs: await this.leaseRemainingMs(first.lease, sessionTtlMs), waiters: first.count - 1 };
    }
    const holders = await this.holders(lockPrefix, first.permits);
    if (holders.length === 0) return null;
    // One read per session lease (a process's holders share one).
    const remaining = new Map<string, number>();
    for (const holder of holders) if (!remaining.has(holder.lease)) remaining.set(holder.lease, await this.leaseRemainingMs(holder.lease, sessionTtlMs));
    const last = holders.reduce((a, b) => (remaining.get(b.lease)! > remaining.get(a.lease)! ? b : a), holders[0]);
    return { owner: last.owner, remainingMs: remaining.get(last.lease)!, waiters: Math.max(0, first.count - holders.length), permits: first.permits, holders: holders.length };
  }

  /**
   * The user keys under `userPrefix` with at least one entry (a holder; waiters follow it): a
   * range read of names only, a page at a time in key order. encodeURIComponent keeps prefixes
   * (the encoding of `ab` starts with that of `a`), and never writes `/`, so a lock's name is what
   * lies between the backend's prefix and the next `/`. The markers (`%lost/…`) and the health
   * key do not decode or have no `/`: skipped.
   */
  async listKeys(userPrefix: string, max: number): Promise<string[]> {
    const names = new Set<string>();
    const start = Buffer.from(`${this.prefix}${encodeURIComponent(userPrefix)}`);
    const end = prefixEnd(start);
    let from = start;
    for (;;) {
      const response = await this.client.kv.range({ key: from, range_end: end, keys_only: true, limit: 1000 }, this.deadline());
      const kvs = response.kvs as { key: Buffer }[];
      for (const { key } of kvs) {
        const name = key.toString().slice(this.prefix.length);
        const slash = name.indexOf('/');
        if (slash < 0) continue;
        let user: string;
        try {
          user = decodeURIComponent(name.slice(0, slash));
        } catch {
          continue;
        }
        names.add(user);
        if (names.size >= max) return [...names];
      }
      if (!response.more || kvs.length === 0) return [...names];
      from = Buffer.concat([kvs[kvs.length - 1].key, Buffer.from([0])]);
    }
  }

  /**
   * The owners whose hold ended: the holder of a plain lock, every holder of a semaphore key (the
   * first `permits` entries as one read saw them); none when nobody held it.
   */
  async forceRelease(lockPrefix: string): Promise<string[]> {
    // The holder may change between the read and the delete: read again (bounded).
    for (let attempt = 0; attempt < 5; attempt++) {
      const first = await this.first(lockPrefix);
      if (!first) return [];
      const leaseId = await this.markerLease();
      if (first.permits === 1 && (await this.end(first, leaseId))) return [first.owner];
      if (first.permits !== 1) {
        // Every holder went meanwhile (none ended): the waiters now holding are read again.
        const ended = await this.endHolders(await this.holders(lockPrefix, first.permits), leaseId);
        if (ended.length > 0) return ended;
      }
    }
    throw new Error('the holder changed 5 times while it was being released (a busy key): call forceRelease() again');
  }

  /**
   * End each of a semaphore's holders, each in its own txn (compared by create revision: a holder
   * that went meanwhile is not anyone else's key). Waiters get the permits as they free.
   */
  private async endHolders(holders: Holder[], leaseId: string): Promise<string[]> {
    const ended = await Promise.all(holders.map((holder) => this.end(holder, leaseId)));
    return holders.filter((_, i) => ended[i]).map((holder) => holder.owner);
  }

  /** Delete `holder`'s key if it is still that key, and leave the marker its process watches, in one txn. */
  private async end(holder: Holder, leaseId: string): Promise<boolean> {
    const response = await this.client.kv.txn(
      {
        compare: [{ key: holder.key, target: 'Create', result: 'Equal', create_revision: holder.createRevision }],
        success: [
          { request_delete_range: { key: holder.key } },
          { request_put: { key: Buffer.from(this.markers + holder.owner), value: Buffer.alloc(0), lease: leaseId } },
        ],
        failure: [],
      },
      this.deadline(),
    );
    return response.succeeded;
  }

  /** A short lease for a forced release's markers. */
  private async markerLease(): Promise<string> {
    const lease = this.client.lease(MARKER_TTL_SECONDS, { autoKeepAlive: false });
    const leaseId = await lease.grant();
    lease.release();
    return leaseId;
  }

  /** What is left of a session lease, ms (the session ttl when it cannot be read). */
  private async leaseRemainingMs(lease: string, sessionTtlMs: number): Promise<number> {
    const ttl = lease !== '0' && this.client.leaseClient ? Number((await this.client.leaseClient.leaseTimeToLive({ ID: lease }, this.deadline())).TTL) : NaN;
    return Number.isFinite(ttl) ? Math.max(0, ttl * 1_000) : sessionTtlMs;
  }

  /** A semaphore's holders: its first `permits` entries by create revision. */
  private async holders(lockPrefix: string, permits: number): Promise<Holder[]> {
    const response = await this.client.kv.range(semaphoreWindowRange(lockPrefix, permits), this.deadline());
    return (response.kvs as Array<{ key: Buffer; create_revision: string; mod_revision: string; lease: string }>).map((kv) => ({
      key: kv.key,
      owner: kv.key.toString().slice(lockPrefix.length),
      createRevision: kv.create_revision,
      modRevision: kv.mod_revision,
      lease: String(kv.lease),
    }));
  }

  /**
   * Nothing is held here any more: the watch (a gRPC stream, which keeps the process alive) ends a
   * second later unless a grant comes first — a process whose bootstrap or listen() failed, with
   * no shutdown hook to close us, must still exit; a busy one keeps its watch.
   */
  idle(): void {
    if (!this.watcher || this.idleTimer) return;
    this.idleTimer = setTimeout(() => this.unwatch(), 1_000).unref();
  }

  close(): void {
    this.closed = true;
    this.unwatch();
  }

  /** End the watch now (the next grant starts it again). */
  unwatch(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    void this.watcher?.cancel().catch(() => undefined);
    this.watcher = undefined;
  }

  /** The lock's first key (its holder), its permits (1: a plain lock), and how many keys it has (holders and waiters). */
  private async first(lockPrefix: string): Promise<(Holder & { permits: number; count: number }) | undefined> {
    const start = Buffer.from(lockPrefix);
    const response = await this.client.kv.range({ key: start, range_end: prefixEnd(start), sort_order: 'Ascend', sort_target: 'Create', limit: 1 }, this.deadline());
    const kv = response.kvs[0] as { key: Buffer; value?: Buffer; create_revision: string; mod_revision: string; lease: string } | undefined;
    if (!kv) return undefined;
    return {
      key: kv.key,
      owner: kv.key.toString().slice(lockPrefix.length),
      createRevision: kv.create_revision,
      modRevision: kv.mod_revision,
      lease: String(kv.lease),
      permits: permitsOf(kv.value),
      count: Number(response.count),
    };
  }
}
