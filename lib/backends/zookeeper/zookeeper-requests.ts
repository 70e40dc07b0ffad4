import {
  EPHEMERAL_SEQUENTIAL,
  PERSISTENT,
  ZK_ERRORS,
  zkErrorCode,
  type ZooKeeperClientLike,
  type ZooKeeperStatLike,
} from './zookeeper-client.interface.js';
import { committed, promised, resultsOf, type BoundedSend } from './zookeeper-ops.util.js';
import { ZooKeeperParents } from './zookeeper-parents.js';
import { isNodeOf, zxid } from './zookeeper-paths.util.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/** Retry deleting a znode whose delete had an unknown outcome this many ms later, then every RETRY_EVERY_MS. */
const RETRY_DELAYS_MS = [500, 2_000, 8_000];
const RETRY_EVERY_MS = 10_000;

/** A client closed (by us, or by its application): nothing it sends will be answered again. */
function isClosedClient(client: ZooKeeperClientLike): boolean {
  const state = (client as { connectionManager?: { state?: number } }).connectionManager?.state;
  return state === CLIENT_CLOSED || state === CLIENT_CLOSING;
}
/** node-zookeeper-client's ConnectionManager states CLOSED and CLOSING. */
const CLIENT_CLOSED = -2;
const CLIENT_CLOSING = -1;
/** A line parent's data: none (a semaphore's token write sets it to nothing again). */
const EMPTY = Buffer.alloc(0);

/** A line: its children's names and the parent's pzxid (the zxid of its latest change). */
export interface Line {
  readonly children: string[];
  readonly pzxid: bigint;
  /** A plain lock's first attempt only: our new znode's create zxid (its token, if nothing changed in the line before the read). */
  readonly czxid?: bigint;
  /** A semaphore's first attempt only: the zxid of its write of the parent's data right after the read. */
  readonly stamp?: bigint;
}

/**
 * The ZooKeeper requests of one backend, each bounded, plus the clean-up of writes whose outcome
 * is unknown (a delete retried in the background; a create answered after we stopped waiting is
 * undone when its answer comes); the lines' parent znodes are `lines` (zookeeper-parents.ts).
 */
export class ZooKeeperRequests {
  /** The lines' parent znodes used lately, deleted once empty and idle. */
  readonly lines: ZooKeeperParents;

  constructor(
    private readonly call: BoundedSend,
    /** The client of the current session, for the parents' sweep (undefined: none now). */
    currentClient: () => ZooKeeperClientLike | undefined = () => undefined,
  ) {
    this.lines = new ZooKeeperParents(call, currentClient);
  }

  /**
   * Create `<parent>/<namePrefix><sequence>` (ephemeral) and read the line, in one write: the read
   * is served after the create. A plain lock's create (`czxid`: on a key not busy lately) goes in
   * a multi-op with a write of the parent's (empty) data, whose answer names the multi's zxid —
   * our znode's czxid, its token should nothing change before the read — without another round
   * trip. On a busy key the create goes alone: it will most likely wait, and a waiter's token is
   * written later. A create answered only
   * after we stopped waiting is deleted then; one whose connection broke (outcome unknown) is
   * looked for by its name and deleted.
   */
  async createAndRead(session: ZooKeeperSession, key: string, parent: string, namePrefix: string, ensure: readonly string[] = [], stamp = false, czxid = !stamp): Promise<[string, Line]> {
    const client = session.client;
    // Parents not known to exist go first, in the same write (one that exists already answers
    // NODE_EXISTS; any other failure shows as the create's NO_NODE).
    for (const path of ensure) client.create(path, undefined, PERSISTENT, () => undefined);
    const name = `${parent}/${namePrefix}`;
    const created: Promise<[string, bigint | undefined]> = !czxid
      ? promised<string>((cb) => client.create(name, undefined, EPHEMERAL_SEQUENTIAL, cb)).then(([path]) => [path, undefined])
      : committed(client.transaction().create(name, undefined, undefined, EPHEMERAL_SEQUENTIAL).setData(parent, EMPTY, -1)).then((results) => [
          results[0].path!,
          zxid(results[1].stat!.mzxid),
        ]);
    const read = promised<string[]>((cb) => client.getChildren(parent, cb));
    read.catch(() => undefined);
    // A semaphore's token (zookeeper-semaphore.ts): a write of its own, after the read.
    const stamped = stamp ? promised<ZooKeeperStatLike>((cb) => client.setData(parent, EMPTY, -1, cb)).then(([stat]) => zxid(stat.mzxid)) : undefined;
    stamped?.catch(() => undefined);
    let path: string;
    let ownCzxid: bigint | undefined;
    try {
      [path, ownCzxid] = await this.call('acquire', key, () => created);
    } catch (error) {
      if (zkErrorCode(error) !== ZK_ERRORS.NO_NODE) {
        // Late answer: undo it. Lost connection: the znode may exist under a name we never learnt.
        created.then(
          ([late]) => this.removeLater(session, late, 0),
          (failure: unknown) => {
            if (zkErrorCode(failure) === ZK_ERRORS.CONNECTION_LOSS) this.removeByName(session, parent, namePrefix);
          },
        );
      }
      throw error;
    }
    try {
      const [children, stat] = await this.call('acquire', key, () => read);
      const token = stamped && (await this.call('acquire', key, () => stamped));
      return [path, { children, pzxid: zxid((stat as ZooKeeperStatLike).pzxid), stamp: token, czxid: ownCzxid }];
    } catch (error) {
      this.removeLater(session, path, 0);
      throw error;
    }
  }

  /** Our znode's data and stat, leaving `watcher` (a data watch) on it; null when it is gone. */
  async readOwn(client: ZooKeeperClientLike, key: string, path: string, watcher?: (event: unknown) => void): Promise<{ data: Buffer | undefined; stat: ZooKeeperStatLike } | null> {
    try {
      const [data, stat] = await this.call('acquire', key, () => promised<Buffer | undefined>((cb) => client.getData(path, watcher, cb)));
      return { data, stat: stat as ZooKeeperStatLike };
    } catch (error) {
      if (zkErrorCode(error) === ZK_ERRORS.NO_NODE) return null;
      throw error;
    }
  }

  /**
   * Release a plain holder's znode and hand the lock to `successor` (its next in line) in one
   * multi-op: the successor's znode is written at the zxid that deletes ours, so its mzxid is a
   * token larger than ours with no write of its own; its data, `behind` (the names behind it in
   * line order, '/'-separated), tells it who follows it without a read of the line. 'gone': our
   * znode was not there (nothing written); 'no-successor': the successor's was not (nothing
   * written: delete ours alone).
   */
  async removeHandingOff(client: ZooKeeperClientLike, key: string, path: string, successor: string, behind: readonly string[] = []): Promise<'removed' | 'gone' | 'no-successor'> {
    const data = behind.length > 0 ? Buffer.from(behind.join('/'), 'utf8') : EMPTY;
    try {
      await this.call('release', key, () => committed(client.transaction().remove(path, -1).setData(successor, data, -1)));
      return 'removed';
    } catch (error) {
      const results = resultsOf(error);
      if (zkErrorCode(error) !== ZK_ERRORS.NO_NODE || !results) throw error;
      return results[0]?.err === ZK_ERRORS.NO_NODE ? 'gone' : 'no-successor';
    }
  }

  /** The line under `parent`; undefined when the parent is gone. */
  async readLine(client: ZooKeeperClientLike, key: string, parent: string, operation = 'acquire'): Promise<Line | undefined> {
    try {
      const [children, stat] = await this.call(operation, key, () => promised<string[]>((cb) => client.getChildren(parent, cb)));
      return { children, pzxid: zxid((stat as ZooKeeperStatLike).pzxid) };
    } catch (error) {
      if (zkErrorCode(error) === ZK_ERRORS.NO_NODE) return undefined;
      throw error;
    }
  }

  exists(client: ZooKeeperClientLike, key: string, path: string, operation = 'extend'): Promise<ZooKeeperStatLike | null> {
    return this.call(operation, key, () => this.rawExists(client, path));
  }

  rawExists(client: ZooKeeperClientLike, path: string): Promise<ZooKeeperStatLike | null> {
    return promised<ZooKeeperStatLike | null>((cb) => client.exists(path, undefined, cb)).then(([stat]) => stat);
  }

  /**
   * Watch `path` (the znode ahead of a waiter's) for its deletion; false when it is gone already.
   * A child watch (our znodes are ephemeral: they never have children), which fires on the znode's
   * deletion and nothing else — a data watch would fire on the write that hands the lock to that
   * znode too, and wake the one behind it for nothing. Not `exists`: on a missing znode it would
   * leave a watch for its creation — which, for a sequential name, never comes — for the session's
   * life; a missing znode's `getChildren` leaves none.
   */
  async watch(client: ZooKeeperClientLike, key: string, path: string, watcher: () => void): Promise<boolean> {
    try {
      await this.call('acquire', key, () => promised<string[]>((cb) => client.getChildren(path, watcher, cb)));
      return true;
    } catch (error) {
      if (zkErrorCode(error) === ZK_ERRORS.NO_NODE) return false;
      throw error;
    }
  }

  /**
   * Record a grant on our znode (`data`: a plain lock keeps it empty, a semaphore writes its held
   * mark): the zxid of that write — unique, and larger than every zxid committed before it, on any
   * line — or undefined when the znode is gone. It stays on the server as the znode's mzxid.
   */
  async recordGrant(client: ZooKeeperClientLike, key: string, path: string, data: Buffer = EMPTY): Promise<bigint | undefined> {
    try {
      const [stat] = await this.call('acquire', key, () => promised<ZooKeeperStatLike>((cb) => client.setData(path, data, -1, cb)));
      return zxid(stat.mzxid);
    } catch (error) {
      if (zkErrorCode(error) === ZK_ERRORS.NO_NODE) return undefined;
      throw error;
    }
  }

  /** Delete our znode: true if it was there. */
  async remove(client: ZooKeeperClientLike, key: string, path: string): Promise<boolean> {
    try {
      await this.call('release', key, () => promised<void>((cb) => client.remove(path, -1, cb as never)));
      return true;
    } catch (error) {
      if (zkErrorCode(error) === ZK_ERRORS.NO_NODE) return false;
      throw error;
    }
  }

  /** Delete, bounded, never failing (shutdown). */
  removeQuietly(client: ZooKeeperClientLike, path: string): Promise<unknown> {
    return this.call('release', '', () => promised<void>((cb) => client.remove(path, -1, cb as never)), true).catch(() => undefined);
  }

  /**
   * Delete `path` in the background until an answer says it is gone, or its session is over for
   * good (its znodes went with it), or its client is closed: a znode of ours left on a live session
   * would block its line for as long as the session lives. Retried after 0.5, 2 and 8 s, then
   * every 10 s.
   */
  removeLater(session: ZooKeeperSession, path: string, attempt = 0): void {
    const run = (): void => {
      // Even after close: a znode of ours on an application's client outlives our backend.
      promised<void>((cb) => session.client.remove(path, -1, cb as never)).then(
        () => undefined,
        (error: unknown) => {
          const code = zkErrorCode(error);
          if (code === ZK_ERRORS.NO_NODE || code === ZK_ERRORS.SESSION_EXPIRED || isClosedClient(session.client)) return;
          this.removeLater(session, path, attempt + 1);
        },
      );
    };
    if (attempt === 0) run();
    else setTimeout(run, RETRY_DELAYS_MS[attempt - 1] ?? RETRY_EVERY_MS).unref();
  }

  /** A create with an unknown outcome: find a znode of that name in the line and delete it. */
  private removeByName(session: ZooKeeperSession, parent: string, namePrefix: string, attempt = 0): void {
    setTimeout(() => {
      // Even after close (as removeLater): the application's client outlives our backend.
      if (isClosedClient(session.client)) return;
      promised<string[]>((cb) => session.client.getChildren(parent, cb)).then(
        ([children]) => {
          for (const child of children) if (isNodeOf(child, namePrefix)) this.removeLater(session, `${parent}/${child}`);
        },
        (error: unknown) => {
          if (zkErrorCode(error) === ZK_ERRORS.NO_NODE || attempt + 1 >= RETRY_DELAYS_MS.length) return;
          this.removeByName(session, parent, namePrefix, attempt + 1);
        },
      );
    }, RETRY_DELAYS_MS[attempt]).unref();
  }

  /** Create the persistent znodes of `paths` (root first) that do not exist yet, in one write. */
  async ensurePath(client: ZooKeeperClientLike, key: string, paths: string[]): Promise<void> {
    const creates = paths.map((path) =>
      promised<string>((cb) => client.create(path, undefined, PERSISTENT, cb)).catch((error: unknown) => {
        if (zkErrorCode(error) !== ZK_ERRORS.NODE_EXISTS) throw error;
      }),
    );
    await this.call('acquire', key, () => Promise.all(creates));
  }

}
