import type { HeldLock } from '../lock-backend.interface.js';
import type { EtcdClientLike, EtcdWatcherLike } from './etcd-client.interface.js';
import { prefixEnd } from './etcd-requests.util.js';

/** How long a forced release's marker lives: long enough for every holder's watch to catch up after a reconnect. */
const MARKER_TTL_SECONDS = 60;

/** etcd's inspect(): the holder's owner id too, so the engine can add its token when it is local. */
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
 * The token is not on the server: it is the revision of the read that made the holder first, known
 * to its process only (the engine adds it when the holder is local). What is left of the hold is
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
    prefix: string,
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

  async inspect(lockPrefix: string, sessionTtlMs: number): Promise<EtcdHeldLock | null> {
    const first = await this.first(lockPrefix);
    if (!first) return null;
    const ttl = first.lease !== '0' && this.client.leaseClient ? Number((await this.client.leaseClient.leaseTimeToLive({ ID: first.lease }, this.deadline())).TTL) : NaN;
    return { owner: first.owner, remainingMs: Number.isFinite(ttl) ? Math.max(0, ttl * 1_000) : sessionTtlMs, waiters: first.count - 1 };
  }

  /** The holder's owner id, or undefined when nobody held the lock. */
  async forceRelease(lockPrefix: string): Promise<string | undefined> {
    // The holder may change between the read and the delete: read again (bounded).
    for (let attempt = 0; attempt < 5; attempt++) {
      const first = await this.first(lockPrefix);
      if (!first) return undefined;
      const lease = this.client.lease(MARKER_TTL_SECONDS, { autoKeepAlive: false });
      const leaseId = await lease.grant();
      lease.release();
      const response = await this.client.kv.txn(
        {
          compare: [{ key: first.key, target: 'Create', result: 'Equal', create_revision: first.createRevision }],
          success: [
            { request_delete_range: { key: first.key } },
            { request_put: { key: Buffer.from(this.markers + first.owner), value: Buffer.alloc(0), lease: leaseId } },
          ],
          failure: [],
        },
        this.deadline(),
      );
      if (response.succeeded) return first.owner;
    }
    throw new Error('the holder changed 5 times while it was being released (a busy key): call forceRelease() again');
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

  /** The lock's first key (its holder) and how many keys it has (holder and waiters). */
  private async first(lockPrefix: string): Promise<{ key: Buffer; owner: string; createRevision: string; lease: string; count: number } | undefined> {
    const start = Buffer.from(lockPrefix);
    const response = await this.client.kv.range({ key: start, range_end: prefixEnd(start), sort_order: 'Ascend', sort_target: 'Create', limit: 1, keys_only: true }, this.deadline());
    const kv = response.kvs[0] as { key: Buffer; create_revision: string; lease: string } | undefined;
    if (!kv) return undefined;
    return { key: kv.key, owner: kv.key.toString().slice(lockPrefix.length), createRevision: kv.create_revision, lease: String(kv.lease), count: Number(response.count) };
  }
}
