import { monotonicNow } from '../../common/validity.util.js';
import type { AcquireRequest, AcquireResult } from '../lock-backend.interface.js';
import { nextTurn } from '../ordered-queue.js';
import { permitsMismatch } from '../semaphore.util.js';
import type { TurnWaiters } from '../wait-turn.util.js';
import { ZK_ERRORS, zkErrorCode } from './zookeeper-client.interface.js';
import { inLineOrder, permitsOfNode, semaphoreNamePrefix } from './zookeeper-paths.util.js';
import { promised, type BoundedSend } from './zookeeper-ops.util.js';
import type { Line, ZooKeeperRequests } from './zookeeper-requests.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/** One znode of ours: an owner's place in a lock's line, on the session that created it. */
export interface ZooKeeperNode {
  readonly key: string;
  readonly parent: string;
  readonly path: string;
  readonly name: string;
  readonly session: ZooKeeperSession;
  holding: boolean;
  /** A plain lock's znode: its create zxid (undefined: created alone, on a key busy lately); its token when nothing changed in the line between its create and its first read. */
  readonly czxid?: bigint;
  /**
   * A plain holder's next in line at the read that granted it (its path; a plain lock's znode):
   * its release hands the lock over to it (ZooKeeperRequests.removeHandingOff).
   */
  successor?: string;
  /** The names behind `successor` at that read, in line order (plain ones): written on its znode by the hand-over. */
  behindSuccessor?: string[];
  /** Wakes its owner (one function per node, so the client keeps each watch of it once). */
  readonly watcher: () => void;
  /** The data watch of our own znode is set (by a read with `ownWatcher`; cleared when it fires). */
  ownWatched?: boolean;
  /** Told of a change to our own znode (one function per node: see ZooKeeperHolds.readOwn). */
  ownWatcher?: (event: unknown) => void;
  /** How many times `ownWatcher` was told of a change. */
  ownEvents?: number;
}

/** How an acquirer's znode is named and what its first read of the line decides. */
export interface Placement {
  /** The znode's name before its sequence. */
  namePrefix(owner: string): string;
  /** Write the parent's data right after the read, in the same write (a semaphore's token). */
  readonly stamp: boolean;
  /** Our znode is in the line at `place` (of `order`): the answer. */
  decide(request: AcquireRequest, node: ZooKeeperNode, line: Line, order: string[], place: number): AcquireResult | Promise<AcquireResult>;
}

/** The parts of a ZooKeeper backend its semaphores run on: the same sessions, znodes and waiters. */
export interface ZooKeeperSemaphoreParts {
  /** The backend's name, for errors. */
  readonly name: string;
  readonly requests: ZooKeeperRequests;
  readonly nodes: Map<string, ZooKeeperNode>;
  readonly turns: TurnWaiters;
  readonly call: BoundedSend;
  /** Create the owner's znode and read the line in one write, then `placement.decide()`. */
  enqueue(request: AcquireRequest, placement: Placement): Promise<AcquireResult>;
  /** Read the line a queued owner is in; undefined: its znode or session is gone. */
  readLine(owner: string, node: ZooKeeperNode): Promise<{ line: Line; order: string[]; place: number } | undefined>;
  /** Delete a znode that must not stay (a refused or single try), in the background if unanswered. */
  leave(node: ZooKeeperNode): Promise<void>;
  /** Grant `owner` its node with `token`; `mark`: write the held mark first (in the background). */
  granted(owner: string, node: ZooKeeperNode, token: bigint, mark: boolean): AcquireResult;
  drop(owner: string): void;
}

/** The data of a holder's znode: its successor, watching it, learns it moved up (see below). */
export const HELD = Buffer.from('held');

/**
 * A semaphore of `permits` on ZooKeeper: the same line as the plain lock — ephemeral sequential
 * znodes under `<prefix>/<key>`, on the process's session — where the first `permits` znodes hold.
 * Its znodes are named `<owner>%S<permits>-<sequence>`, so every reader of the line sees every
 * permits of it: an acquirer refuses (and deletes its znode) when a znode ahead of it has other
 * permits — a plain lock's counting as 1 — and the plain acquire refuses when it finds a semaphore
 * znode ahead. Only the oldest znode is judged (see mismatch()), and a znode ahead is never added
 * after our first read.
 *
 * At most `permits` hold: a granted znode had fewer than `permits` znodes ahead at its read, and
 * the znodes ahead of it then are all the older ones still there; of `permits` + 1 live holders the
 * youngest would have seen the `permits` others ahead.
 *
 * Tokens: the parent's `pzxid` is no token here (two holders reading one state would share it), and
 * neither is a znode's `czxid` (a waiter woken late is granted after a younger holder). Each grant
 * writes once after the read that admitted it, and its token is that write's zxid: unique, and
 * larger than every zxid committed before — so larger than the token of every holder whose znode
 * was gone at that read (its token was written before its znode's deletion, plain holders' pzxid
 * too) and of every grant answered before the write was sent. Only holders that overlapped (both
 * admitted, both znodes there) may see their tokens in the other order than their answers. A plain
 * holder after us reads a pzxid at least our znode's deletion, which follows our write. The first
 * attempt writes the parent's data in the create-and-read write, after the read (no extra round
 * trip); a waiter's grant writes its own znode's data (HELD), which is also the mark below.
 *
 * Waiting, without polling: a waiter with other waiters ahead watches only its predecessor's znode
 * (deleted, or marked HELD once it holds: either way the waiter re-reads); the first waiter — the
 * one a departing holder admits — watches the line itself (a children watch: any holder leaving).
 * A grant at the first attempt marks its znode in the background. The backend's 5 s re-read stays
 * the fallback. A holder's own ttl and loss are the plain lock's: the engine deletes the znode at
 * the ttl, the session's end takes it otherwise; a forced release deletes it and its holder hears
 * it by the data watch on its own znode.
 */
export class ZooKeeperSemaphores {
  constructor(private readonly host: ZooKeeperSemaphoreParts) {}

  /** Holding, extending, releasing and waiting are the plain lock's (any znode of ours): only the acquisition differs. */
  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const node = this.host.nodes.get(request.owner);
    if (node && !node.holding) {
      if (!node.session.lost) {
        const result = await this.recheck(request, node);
        if (result) return result;
      }
      this.host.drop(request.owner);
    }
    const permits = request.permits ?? 1;
    return this.host.enqueue(request, {
      namePrefix: (owner) => semaphoreNamePrefix(owner, permits, this.host.name),
      stamp: true,
      decide: (request, node, line, order, place) => this.decide(request, node, line, order, place),
    });
  }

  /** The first read of the line after our create (the stamp written right after it). */
  private async decide({ key, owner, queue, permits = 1 }: AcquireRequest, node: ZooKeeperNode, line: Line, order: string[], place: number): Promise<AcquireResult> {
    const found = this.mismatch(order, place, permits);
    if (found !== undefined) {
      // Refused whatever the delete's answer (unanswered, it is retried in the background).
      await this.host.leave(node).catch(() => undefined);
      throw permitsMismatch(key, found, permits);
    }
    if (place < permits) return this.host.granted(owner, node, line.stamp!, true);
    if (!queue) {
      await this.host.leave(node);
      return { acquired: false };
    }
    this.host.nodes.set(owner, node);
    this.host.turns.track(owner);
    this.watch(node, order, place, permits);
    return { acquired: false };
  }

  /**
   * A queued owner's next attempt (the kit's ordered-queue recipe, nextTurn): read the line;
   * admitted, write the mark (the token) first. undefined: our znode is gone, start over.
   */
  private recheck({ key, owner, permits = 1 }: AcquireRequest, node: ZooKeeperNode): Promise<AcquireResult | undefined> {
    const { host } = this;
    return nextTurn<ZooKeeperNode, undefined>(
      {
        look: async (owner, node) => {
          const read = await host.readLine(owner, node);
          if (!read) return GONE;
          const found = this.mismatch(read.order, read.place, permits);
          if (found !== undefined) throw permitsMismatch(key, found, permits);
          if (read.place < permits) return { kind: 'first', grant: undefined };
          // The first waiter watches the line, a later one its predecessor: set here, with the order read.
          this.watch(node, read.order, read.place, permits);
          return { kind: 'ahead' };
        },
        current: (owner, node) => host.nodes.get(owner) === node,
        lost: (node) => node.session.lost,
        watchAhead: () => undefined,
        record: async (_owner, node) => {
          const sentAt = monotonicNow();
          const token = await this.mark(node);
          if (token !== undefined && !node.session.lost) node.session.heard(sentAt);
          return token;
        },
        grant: (owner, node, token) => host.granted(owner, node, token, false),
        drop: (owner) => host.drop(owner),
      },
      owner,
      node,
    );
  }

  /**
   * The permits of the oldest znode when it is ahead of `place` and differs from ours. Only the
   * oldest is judged: a znode behind it with other permits belongs to an acquirer about to refuse
   * itself (it sees the oldest too), and must not get an agreeing acquirer refused meanwhile; it
   * keeps its place in the window until it is gone, so nothing is admitted beyond the permits.
   */
  private mismatch(order: string[], place: number, permits: number): number | undefined {
    if (place === 0) return undefined;
    const found = permitsOfNode(order[0]);
    return found !== permits ? found : undefined;
  }

  /** Write HELD to our znode: the zxid of that write, or undefined when the znode is gone. */
  private mark(node: ZooKeeperNode): Promise<bigint | undefined> {
    return this.host.requests.recordGrant(node.session.client, node.key, node.path, HELD);
  }

  /**
   * A waiter at `place` (≥ permits): the first one watches the line (any holder leaving admits
   * it), a later one its predecessor (gone, or marked HELD: it moved up). A watch that finds its
   * cue already there wakes at once; a failed one too (the re-read decides).
   */
  private watch(node: ZooKeeperNode, order: string[], place: number, permits: number): void {
    const { client } = node.session;
    const cue: Promise<boolean> =
      place === permits
        ? this.host
            .call('acquire', node.key, () => promised<string[]>((cb) => client.getChildren(node.parent, node.watcher, cb)))
            .then(([children]) => inLineOrder(children).indexOf(node.name) < permits)
        : this.host
            .call('acquire', node.key, () => promised<Buffer | undefined>((cb) => client.getData(`${node.parent}/${order[place - 1]}`, node.watcher, cb)))
            .then(
              ([data]) => data !== undefined && data !== null && HELD.equals(data),
              (error: unknown) => {
                if (zkErrorCode(error) === ZK_ERRORS.NO_NODE) return true;
                throw error;
              },
            );
    cue.then(
      (now) => now && node.watcher(),
      () => node.watcher(),
    );
  }
}

const GONE = { kind: 'gone' } as const;
