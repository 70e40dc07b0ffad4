import { monotonicNow } from '../../common/validity.util.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { BusyKeys } from '../busy-keys.js';
import { nextTurn, type LineOperations } from '../ordered-queue.js';
import type { AcquireRequest, AcquireResult } from '../lock-backend.interface.js';
import { permitsMismatch } from '../semaphore.util.js';
import { ZK_ERRORS, zkErrorCode } from './zookeeper-client.interface.js';
import type { ZooKeeperHolds } from './zookeeper-holds.js';
import { ancestry, inLineOrder, isPlainNode, nodeNamePrefix, permitsOfNode, zxid } from './zookeeper-paths.util.js';
import type { Line, ZooKeeperRequests } from './zookeeper-requests.js';
import type { Placement, ZooKeeperNode as Node } from './zookeeper-semaphore.js';
import type { ZooKeeperSessions } from './zookeeper-sessions.js';

export interface ZooKeeperAcquireParts {
  readonly name: string;
  readonly requests: ZooKeeperRequests;
  readonly sessions: ZooKeeperSessions;
  readonly holds: ZooKeeperHolds;
  /** The parent znode of one lock's line. */
  parentOf(key: string): string;
  closed(): boolean;
}

/**
 * The acquire protocol of a ZooKeeper backend (its class comment says why it is safe): create the
 * owner's znode and read the line in one write, then decide — first in line holds, a waiter
 * watches the znode just ahead — and on each wake-up read our own znode (handed the lock by the
 * release ahead, we hold), else the line again.
 */
export class ZooKeeperAcquisition {
  /** Requests started over once already because their new znode was force-released before its grant was recorded. */
  private readonly restarted = new WeakSet<AcquireRequest>();
  /** Creates (with their read of the line) in flight. */
  readonly enqueuing = new Set<Promise<unknown>>();
  /** The prefix's znodes were there at our last create. */
  private prefixKnown = false;
  private readonly holds: ZooKeeperHolds;
  /** Keys found busy lately: a create there skips the czxid's write (see createAndRead). */
  private readonly busyKeys = new BusyKeys();
  /** The plain lock's znodes: `<owner>-<sequence>`, first in line holds. */
  readonly plain: Placement = {
    namePrefix: (owner) => nodeNamePrefix(owner, this.parts.name),
    stamp: false,
    decide: (request, node, line, order, place) => this.decide(request, node, line, order, place),
  };

  /** Keys seen busy lately (see LockBackend.bookkeeping). */
  busyKeyCache(): string[] {
    return this.busyKeys.keys();
  }

  constructor(private readonly parts: ZooKeeperAcquireParts) {
    this.holds = parts.holds;
  }

  /**
   * First attempt of an owner: create its znode and read the line in one write (the read comes
   * after the create on the server: one session's requests are served in order), then let the
   * placement (the plain lock's, or a semaphore's) decide.
   */
  async enqueue(request: AcquireRequest, placement: Placement, retried = false): Promise<AcquireResult> {
    const { key, owner } = request;
    const session = await this.parts.sessions.get(key);
    const parent = this.parts.parentOf(key);
    const namePrefix = placement.namePrefix(owner);
    // A line not used here lately may have no parent yet: create it (and, the first time, the
    // prefix) in the same write rather than after a failed create.
    const ensure = this.parts.requests.lines.knows(parent) ? [] : this.prefixKnown ? [parent] : ancestry(parent);
    const sentAt = monotonicNow();
    let path: string;
    let line: Line;
    // A key busy a moment ago: our create most likely waits, so it goes without the czxid's write.
    const czxid = !placement.stamp && !this.busyKeys.recentlyBusy(key);
    const creating = this.parts.requests.createAndRead(session, key, parent, namePrefix, ensure, placement.stamp, czxid);
    this.enqueuing.add(creating);
    try {
      [path, line] = await creating;
      this.prefixKnown = true;
    } catch (error) {
      if (!retried && zkErrorCode(error) === ZK_ERRORS.NO_NODE) {
        // Deleted since we last used it (an idle line reaped by another process, the prefix by hand).
        this.prefixKnown = false;
        await this.parts.requests.ensurePath(session.client, key, ancestry(parent));
        return this.enqueue(request, placement, true);
      }
      throw error;
    } finally {
      this.enqueuing.delete(creating);
    }
    if (this.parts.closed()) {
      // Closed while the create was in flight: its znode must not outlive us.
      await this.parts.requests.removeQuietly(session.client, path);
      throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'the backend is closed (application shutting down)', { key });
    }
    session.heard(sentAt);
    const name = path.slice(parent.length + 1);
    const order = inLineOrder(line.children);
    const place = order.indexOf(name);
    const node: Node = { key, parent, path, name, session, holding: false, czxid: line.czxid, watcher: () => this.holds.turns.wake(owner) };
    if (session.lost || place < 0) {
      // The session ended under us (or our znode is gone already): start again on a new one.
      this.parts.requests.removeLater(session, path);
      if (retried) throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'the ZooKeeper session was lost while acquiring', { key });
      return this.enqueue(request, placement, true);
    }
    this.parts.requests.lines.touch(parent);
    return placement.decide(request, node, line, order, place);
  }

  /**
   * The plain lock's first read: first in line, ours, with our znode's czxid as the token. Else a
   * semaphore's znode ahead refuses us (permits 1 against its), a single try deletes its znode
   * again, and a waiter watches the one ahead.
   */
  private decide(request: AcquireRequest, node: Node, line: Line, order: string[], place: number): AcquireResult | Promise<AcquireResult> {
    const { key, owner, queue } = request;
    if (place === 0) followers(node, order);
    if (place === 0 && node.czxid !== undefined && line.pzxid === node.czxid) return this.holds.granted(owner, node, node.czxid);
    if (place === 0) return this.firstRecorded(request, node);
    this.busyKeys.busy(key);
    // The contended path only: a znode ahead is never added after this read.
    for (let i = 0; i < place; i++) {
      const permits = permitsOfNode(order[i]);
      if (permits !== 1) return this.leave(node).then(() => Promise.reject(permitsMismatch(key, permits, 1)), () => Promise.reject(permitsMismatch(key, permits, 1)));
    }
    // A single try leaves no trace: its znode goes before we answer "busy".
    if (!queue) return this.leave(node).then(() => ({ acquired: false }));
    this.holds.queue(owner, node, order[place - 1]);
    return { acquired: false };
  }

  /**
   * First at the first read, but the line changed since our create: the grant is recorded. Not
   * queued yet, our znode is known to nobody else here, so whatever keeps it from being granted
   * deletes it (in the background): an unanswered write (with the error), a session lost meanwhile
   * (the write may have landed on a session the application's client keeps), a forced release.
   * Force-released before the grant was recorded: one more attempt, as from the start.
   */
  private async firstRecorded(request: AcquireRequest, node: Node): Promise<AcquireResult> {
    let result: AcquireResult | undefined;
    try {
      result = await this.recordedGrant(request.owner, node);
    } catch (error) {
      this.parts.requests.removeLater(node.session, node.path);
      throw error;
    }
    if (result) return result;
    this.parts.requests.removeLater(node.session, node.path);
    if (!node.session.lost && !this.restarted.has(request)) {
      this.restarted.add(request);
      return this.enqueue(request, this.plain, true);
    }
    throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'our znode was gone (its session lost, or force-released) before its grant was recorded', { key: node.key });
  }

  /** Delete a znode that is not to stay; unanswered, in the background (and the error thrown). */
  async leave(node: Node): Promise<void> {
    try {
      await this.parts.requests.remove(node.session.client, node.key, node.path);
    } catch (error) {
      this.parts.requests.removeLater(node.session, node.path);
      throw error;
    }
  }

  /**
   * A queued owner's next attempt (the kit's ordered-queue recipe, nextTurn): read our znode
   * first. Written since its create, it was handed the lock by the holder ahead (at the zxid that
   * deleted that holder's znode: see ZooKeeperBackend.release), which also wrote who follows us —
   * so we are first, that zxid is our token, and the line needs no read. Else read the line: first,
   * the grant is recorded; not first, watch the one ahead. undefined: our znode is gone, start over.
   */
  recheck(request: AcquireRequest, node: Node): Promise<AcquireResult | undefined> {
    return nextTurn(this.line, request.owner, node);
  }

  /** The server's side of the recipe; a grant carries the line behind the new holder (see followers()). */
  private readonly line: LineOperations<Node, readonly string[]> = {
    look: async (owner, node) => {
      const sentAt = monotonicNow();
      const own = await this.holds.readOwn(owner, node);
      if (!own || node.session.lost || this.holds.nodes.get(owner) !== node) return GONE;
      node.session.heard(sentAt);
      // Only a predecessor's hand-off writes a waiting plain znode (our own record comes at our grant).
      if (own.stat.version > 0) return { kind: 'handed', token: zxid(own.stat.mzxid), grant: ['', ...decodeFollowers(own.data)] };
      const read = await this.readLine(owner, node);
      if (!read) return GONE;
      return read.place === 0 ? { kind: 'first', grant: read.order } : { kind: 'ahead', predecessor: read.order[read.place - 1] };
    },
    current: (owner, node) => this.holds.nodes.get(owner) === node,
    lost: (node) => node.session.lost,
    watchAhead: (_owner, node, predecessor) => this.holds.watch(node, predecessor),
    record: (_owner, node) => this.record(node),
    grant: (owner, node, token, order) => {
      followers(node, order);
      return this.holds.granted(owner, node, token);
    },
    drop: (owner) => this.holds.drop(owner),
  };

  /**
   * First in line at a read that cannot vouch for our czxid as the token: the grant is recorded
   * by one write to our znode, its zxid the token (see the class comment) — written before the
   * holder's own watch of its znode is set up, so that watch never sees it. undefined: our znode
   * (or its session) is gone, start over.
   */
  private async recordedGrant(owner: string, node: Node): Promise<AcquireResult | undefined> {
    const token = await this.record(node);
    if (token === undefined || node.session.lost) {
      if (this.holds.nodes.get(owner) === node) this.holds.drop(owner);
      return undefined;
    }
    return this.holds.granted(owner, node, token);
  }

  /** One write to our znode; its zxid (undefined: the znode is gone). */
  private async record(node: Node): Promise<bigint | undefined> {
    const sentAt = monotonicNow();
    const token = await this.parts.requests.recordGrant(node.session.client, node.key, node.path);
    if (token !== undefined && !node.session.lost) node.session.heard(sentAt);
    return token;
  }

  /** Read the line a queued owner is in; undefined: its znode (or its session) is gone. */
  async readLine(owner: string, node: Node): Promise<{ line: Line; order: string[]; place: number } | undefined> {
    const sentAt = monotonicNow();
    const line = await this.parts.requests.readLine(node.session.client, node.key, node.parent);
    if (!line || node.session.lost || this.holds.nodes.get(owner) !== node) return undefined;
    node.session.heard(sentAt);
    const order = inLineOrder(line.children);
    const place = order.indexOf(node.name);
    return place < 0 ? undefined : { line, order, place };
  }
}

const GONE = { kind: 'gone' } as const;

/** At most this many names behind a successor go with a hand-over (~60 bytes each), and at most this many bytes of them. */
const FOLLOWERS_MAX = 32;
const FOLLOWERS_MAX_BYTES = 4_096;

/**
 * A new holder, first of `order`: the plain znodes behind it, in line order, up to the first that
 * is not plain — its successor (whom its release hands the lock to) and the names behind that one
 * (written on the successor's znode by the hand-over, so that it needs no read of the line).
 */
function followers(node: Node, order: readonly string[]): void {
  const plain: string[] = [];
  let bytes = 0;
  for (const name of order.slice(1, FOLLOWERS_MAX + 2)) {
    if (!isPlainNode(name) || !SEQUENCED.test(name)) break;
    // The successor itself always (it is not written); the names behind it within the byte budget.
    bytes += plain.length > 0 ? Buffer.byteLength(name) + 1 : 0;
    if (bytes > FOLLOWERS_MAX_BYTES) break;
    plain.push(name);
  }
  node.successor = plain.length > 0 ? `${node.parent}/${plain[0]}` : undefined;
  node.behindSuccessor = plain.slice(1);
}

/** A znode name as ZooKeeper's sequence ends it (`<name>-` + 10 digits). */
const SEQUENCED = /-\d{10}$/;

/**
 * The names a hand-over wrote on our znode ('/'-separated: an encoded owner has none). Only what
 * reads as a plain znode of a line counts: a write by anything else names nobody to hand on to.
 */
function decodeFollowers(data: Buffer | undefined): string[] {
  return data && data.length > 0 ? data.toString('utf8').split('/') : [];
}
