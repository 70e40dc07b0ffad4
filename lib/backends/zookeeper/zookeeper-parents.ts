import { monotonicNow } from '../../common/validity.util.js';
import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';
import { promised, type BoundedSend } from './zookeeper-ops.util.js';

/** A line's parent znode nobody here used for this long is deleted if empty. */
const PARENT_IDLE_MS = 60_000;
/** Parents are deleted this many per write, in at most this many writes per sweep (and at close). */
const PARENT_SWEEP_MAX = 1_000;
const PARENT_SWEEP_BATCHES = 20;

/**
 * The parent znodes of the lines one backend used (`<prefix>/<key>`, persistent): known to exist
 * while used lately (a create needs no ensure write), deleted once empty and idle for a while, and
 * all of them (if empty) at close.
 */
export class ZooKeeperParents {
  /** Parent znodes this backend used, by when it last did. */
  private readonly parents = new Map<string, number>();
  private sweeper?: NodeJS.Timeout;
  private closed = false;

  /** The lines used lately (a per-key cache: see LockBackend.bookkeeping). */
  lineCache(): string[] {
    return [...this.parents.keys()];
  }

  constructor(
    private readonly call: BoundedSend,
    /** The client of the current session, for the sweep (undefined: none now). */
    private readonly currentClient: () => ZooKeeperClientLike | undefined,
  ) {}

  /** Whether any line's parent is still to be deleted. */
  get hasParents(): boolean {
    return this.parents.size > 0;
  }

  /** Whether `parent` was used here lately (so it exists, unless somebody deleted it since). */
  knows(parent: string): boolean {
    return this.parents.has(parent);
  }

  /** `parent` was used now. */
  touch(parent: string): void {
    this.parents.set(parent, monotonicNow());
    if (!this.sweeper && !this.closed) {
      this.sweeper = setInterval(() => {
        const client = this.currentClient();
        if (client) void this.reapParents(client, false);
      }, PARENT_IDLE_MS);
      this.sweeper.unref();
    }
  }

  /**
   * Delete the parents not used here for a while (all of them with `all`, at close) — if empty:
   * ZooKeeper refuses to delete a znode with children, so a line somebody is in stays. In batches
   * of PARENT_SWEEP_MAX, one write each, for at most PARENT_SWEEP_BATCHES batches per sweep.
   */
  async reapParents(client: ZooKeeperClientLike, all: boolean): Promise<void> {
    if (all) {
      this.closed = true;
      clearInterval(this.sweeper);
    }
    for (let batch = 0; batch < PARENT_SWEEP_BATCHES; batch++) {
      const idleSince = monotonicNow() - PARENT_IDLE_MS;
      const victims: string[] = [];
      for (const [parent, used] of this.parents) {
        if (victims.length >= PARENT_SWEEP_MAX) break;
        if (all || used < idleSince) victims.push(parent);
      }
      if (victims.length === 0) break;
      for (const parent of victims) this.parents.delete(parent);
      const removed = await this.call(
        'release',
        '',
        () => Promise.all(victims.map((parent) => promised<void>((cb) => client.remove(parent, -1, cb as never)).catch(() => undefined))),
        all,
      ).then(
        () => true,
        () => false,
      );
      if (!removed) break;
    }
    if (!all && this.parents.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }
}
