import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { HeldLock } from '../lock-backend.interface.js';
import { inLineOrder, keyOfSegment, ownerOfNode, permitsOfNode, semaphoreHolders, zxid } from './zookeeper-paths.util.js';
import type { BoundedSend } from './zookeeper-ops.util.js';
import type { ZooKeeperRequests } from './zookeeper-requests.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/** listKeys() reads this many lines' parents per round trip. */
const LIST_BATCH = 200;

/** What an operator's view reads and does through the backend. */
export interface ZooKeeperAdminParts {
  readonly name: string;
  /** The znode every line lives under. */
  readonly prefix: string;
  readonly requests: ZooKeeperRequests;
  readonly call: BoundedSend;
  session(key: string): Promise<ZooKeeperSession>;
  parentOf(key: string): string;
  /** `owner`'s znode was deleted by a forced release: tell its lease here, if it holds here. */
  forced(owner: string): void;
}

/**
 * An operator's view of one ZooKeeper backend's lines: `inspect()`, `listKeys()` and
 * `forceRelease()`, each read from the server (any process's holds, not only this one's).
 */
export class ZooKeeperAdmin {
  constructor(private readonly zk: ZooKeeperAdminParts) {}

  /**
   * The first znode of the key's line holds it. What is left is the session timeout (how long the
   * server keeps the znode once its process stops; the engine deletes it at the lease's own ttl);
   * the token, the first znode's mzxid (one more read; while a waiter's grant is being recorded,
   * its czxid). A semaphore's line: its first `permits` znodes hold, the owner reported is the
   * youngest holder's (its token, written after the read that admitted it, is known to its
   * process only: the engine adds it when the holder is local).
   */
  async inspect(key: string, tries = 3): Promise<HeldLock | null> {
    const session = await this.zk.session(key);
    const line = await this.zk.requests.readLine(session.client, key, this.zk.parentOf(key));
    const ordered = line ? inLineOrder(line.children) : [];
    if (ordered.length === 0) return null;
    const permits = permitsOfNode(ordered[0]);
    if (permits === 1) {
      const first = await this.zk.requests.exists(session.client, key, `${this.zk.parentOf(key)}/${ordered[0]}`, 'inspect');
      // Released between the two reads: read the line again (a busy key, a few times at most).
      if (!first) return tries > 1 ? this.inspect(key, tries - 1) : null;
      return { owner: ownerOfNode(ordered[0]), token: zxid(first.mzxid), remainingMs: session.grantedTimeoutMs, waiters: ordered.length - 1 };
    }
    const holders = semaphoreHolders(ordered);
    const last = holders[holders.length - 1];
    return { owner: ownerOfNode(last), remainingMs: session.grantedTimeoutMs, waiters: ordered.length - holders.length, permits, holders: holders.length };
  }

  /**
   * The lines under the prefix whose key starts with `prefix` and that have a znode now: a line
   * has one only while somebody holds it (a waiter's waits behind a holder's, a single try's is
   * gone before its answer), and a parent stays behind, empty, after the last release until it is
   * reaped. Names are filtered decoded: on the encoded names a prefix `%2E` would match the key `.`.
   */
  async listKeys(prefix: string, max: number): Promise<string[]> {
    const session = await this.zk.session(prefix);
    const line = await this.zk.requests.readLine(session.client, prefix, this.zk.prefix, 'listKeys');
    const candidates = (line?.children ?? []).flatMap((child) => {
      const key = keyOfSegment(child);
      return key !== undefined && key.startsWith(prefix) ? [key] : [];
    });
    const keys: string[] = [];
    // A batch's reads go out together (one round trip), batch after batch until `max` are found.
    for (let i = 0; i < candidates.length && keys.length < max; i += LIST_BATCH) {
      const batch = candidates.slice(i, i + LIST_BATCH);
      const stats = await this.zk.call('listKeys', prefix, () => Promise.all(batch.map((key) => this.zk.requests.rawExists(session.client, this.zk.parentOf(key)))));
      keys.push(...batch.filter((_, j) => (stats[j]?.numChildren ?? 0) > 0));
    }
    return keys.slice(0, max);
  }

  /**
   * Delete the first znode of the key's line — that very znode (its name is unique): a later
   * holder's is never touched. Its holder's process watches its own znode from its grant on. A
   * semaphore's line: every holder's znode, in one write.
   */
  async forceRelease(key: string): Promise<string | undefined> {
    const session = await this.zk.session(key);
    const parent = this.zk.parentOf(key);
    for (let attempt = 0; attempt < 5; attempt++) {
      const line = await this.zk.requests.readLine(session.client, key, parent);
      const ordered = line ? inLineOrder(line.children) : [];
      if (ordered.length === 0) return undefined;
      const holders = permitsOfNode(ordered[0]) === 1 ? [ordered[0]] : semaphoreHolders(ordered);
      const removed = await Promise.all(holders.map((holder) => this.zk.requests.remove(session.client, key, `${parent}/${holder}`)));
      const owners = holders.filter((_, i) => removed[i]).map(ownerOfNode);
      for (const owner of owners) this.zk.forced(owner);
      if (owners.length > 0) return owners[0];
    }
    throw new LockBackendUnavailableError(this.zk.name, 'forceRelease', 'the holder kept changing while it was being released', { key });
  }
}
