import { DEFAULT_DRIFT_FACTOR } from '../../common/checks.util.js';
import { LossListeners } from '../loss-listeners.js';
import { monotonicNow } from '../../common/validity.util.js';
import { AnswerDeadlines } from '../answer-deadlines.js';
import { boundedCall } from '../backend-call.util.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { ZOOKEEPER_CAPABILITIES, ZOOKEEPER_DEFAULTS, type ZooKeeperBackendConfig } from './zookeeper-backend.options.js';
import { lockParent } from './zookeeper-paths.util.js';
import { ZooKeeperRequests } from './zookeeper-requests.js';
import { ZooKeeperSemaphores } from './zookeeper-semaphore.js';
import { permitsOf } from '../semaphore.util.js';
import { ZooKeeperSessions } from './zookeeper-sessions.js';
import { ZooKeeperAdmin } from './zookeeper-admin.js';
import { ZooKeeperHolds } from './zookeeper-holds.js';
import { LINE_RECHECK_MS } from '../ordered-queue.js';
import { ZooKeeperAcquisition } from './zookeeper-acquire.js';

/**
 * `correctness` (and `efficiency`) locks on ZooKeeper, the recipe of its documentation and of the
 * seeds: every acquirer creates an ephemeral sequential znode `<prefix>/<key>/<owner>-<sequence>`;
 * the lowest sequence holds; each waiter watches only the znode just ahead of its own (FIFO, no
 * herd, no clock); an aborted waiter deletes its znode; a crashed or paused holder's znode goes
 * with its session.
 *
 * The fencing token is a zxid, ZooKeeper's replicated, persisted transaction id (with the leader's
 * epoch in the high bits: it grows across restarts and leader changes), kept on the holder's znode
 * as its mzxid, so `inspect()` from any process reports it. A znode found first in line by the read
 * right after its create, with nothing changed in the line in between (the parent's pzxid is our
 * czxid; the create's multi-op tells it), holds with its czxid: nobody was ahead at the create, so
 * every earlier holder's znode, and its token, came before. Any other grant — a waiter's, or a
 * first read that saw the line change — is a write to our znode, its token that write's zxid
 * (larger than every zxid before it): a czxid dating from when we joined the line can be smaller
 * than a token granted on another key meanwhile, and a multi-key lease's token is the largest of
 * its keys'. Usually the holder ahead makes that write: its release deletes its znode and writes
 * its successor's (known at its grant) in one multi-op, with the names behind the successor as the
 * data; the woken successor reads its own znode, finds it written, and holds with that write's
 * zxid, knowing whom to hand on to, without a read of the line. Otherwise (no successor known, it
 * left, the holder's znode went with its session) the waiter reads the line and, first in it,
 * records its grant with its own `setData`. So every
 * token is larger than every token granted before it on any key. (In 0.1.0 the token was the
 * line's `pzxid` at the read that found us first: a process of that version holding beside one of
 * this version can make the next holder's token smaller than its own, which a fence refuses — it
 * fails safe.)
 *
 * A lock's own ttl: znodes have none, so the engine deletes ours when the ttl runs out (and aborts
 * the signal). If the process cannot (paused, crashed, cut off), the session's expiry takes the
 * znode: a lock outlives its ttl only by at most the session timeout, and only when its holder is
 * unhealthy — and the lease is never trusted past what the session guarantees (ZooKeeperSession).
 */
export class ZooKeeperBackend implements LockBackend {
  readonly capabilities = ZOOKEEPER_CAPABILITIES;
  readonly name: string;
  private readonly prefix: string;
  private readonly commandTimeoutMs: number;
  private readonly driftFactor: number;
  private readonly deadlines: AnswerDeadlines;
  private readonly requests: ZooKeeperRequests;
  private readonly lossListeners = new LossListeners();
  private readonly sessions: ZooKeeperSessions;
  /** inspect(), listKeys(), forceRelease(). */
  private readonly admin: ZooKeeperAdmin;
  /** Our znodes by owner, and their waiters. */
  private readonly holds: ZooKeeperHolds;
  private readonly acquisition: ZooKeeperAcquisition;
  private closed = false;
  /** Its semaphores (zookeeper-semaphore.ts), from the first request with `permits` on: the same sessions, znodes and waiters. */
  private semaphores?: ZooKeeperSemaphores;

  constructor(private readonly config: ZooKeeperBackendConfig) {
    this.name = config.name ?? 'zookeeper';
    this.prefix = config.prefix ?? ZOOKEEPER_DEFAULTS.prefix;
    this.commandTimeoutMs = config.commandTimeoutMs ?? ZOOKEEPER_DEFAULTS.commandTimeoutMs;
    this.driftFactor = config.driftFactor ?? DEFAULT_DRIFT_FACTOR;
    this.deadlines = new AnswerDeadlines(this.commandTimeoutMs);
    this.requests = new ZooKeeperRequests(
      (operation, key, send, closing) => this.call(operation, key, send, closing),
      () => this.sessions.liveClient(),
    );
    this.sessions = new ZooKeeperSessions({
      name: this.name,
      prefix: this.prefix,
      driftFactor: this.driftFactor,
      closeGraceMs: this.commandTimeoutMs,
      clients: config,
      requests: this.requests,
      closed: () => this.closed,
      lost: (session, detail) => this.holds.sessionLost(session, detail),
    });
    const { requests, sessions, lossListeners } = this;
    this.holds = new ZooKeeperHolds({ name: this.name, requests, sessions, lossListeners, ownsClient: config.ownsClient });
    this.acquisition = new ZooKeeperAcquisition({ name: this.name, requests, sessions, holds: this.holds, parentOf: (key) => this.parentOf(key), closed: () => this.closed });
    this.admin = new ZooKeeperAdmin({
      name: this.name,
      prefix: this.prefix,
      requests: this.requests,
      call: (operation, key, send, closing) => this.call(operation, key, send, closing),
      session: (key) => this.sessions.get(key),
      parentOf: (key) => this.parentOf(key),
      forced: (owner) => this.holds.forced(owner),
    });
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  /** Until when the session `owner`'s znode lives on is known to live (monotonic). */
  validUntil(owner: string): number | undefined {
    return this.holds.validUntil(owner);
  }

  /** This backend's semaphores (requests with `permits` ≥ 2): lines of the same kind, the first `permits` hold. */
  private semaphoreOf(): ZooKeeperSemaphores {
    const { name, requests, holds, acquisition } = this;
    return (this.semaphores ??= new ZooKeeperSemaphores({
      name,
      requests,
      nodes: holds.nodes,
      turns: holds.turns,
      call: this.call.bind(this),
      enqueue: acquisition.enqueue.bind(acquisition),
      readLine: acquisition.readLine.bind(acquisition),
      leave: acquisition.leave.bind(acquisition),
      granted: holds.granted.bind(holds),
      drop: holds.drop.bind(holds),
    }));
  }

  /** See LockBackend.bookkeeping. */
  bookkeeping(): Record<string, string[]> {
    const { holds, acquisition, sessions, requests } = this;
    const creates = [...acquisition.enqueuing].map((_, i) => `create #${i + 1}`);
    return { nodes: [...holds.nodes.keys()], turns: holds.turns.owners(), creates, sessionHolders: sessions.holders(), lineCache: requests.lines.lineCache(), busyKeyCache: acquisition.busyKeyCache() };
  }

  /** The parent znode of one lock's line. */
  parentOf(key: string): string {
    return lockParent(this.prefix, key, this.name);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    if (permitsOf(request) > 1) return this.semaphoreOf().acquire(request);
    const node = this.holds.nodes.get(request.owner);
    if (node && !node.holding) {
      if (!node.session.lost) {
        const result = await this.acquisition.recheck(request, node);
        if (result) return result;
      }
      this.holds.drop(request.owner);
    }
    return this.acquisition.enqueue(request, this.acquisition.plain);
  }

  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.holds.turns.wait(owner, Math.min(timeoutMs, LINE_RECHECK_MS), signal);
  }

  /**
   * `ttlMs` is not sent: znodes have no expiry of their own (see the class comment). Our znode
   * existing now, on a session not lost, is all an extend can check.
   */
  async extend(key: string, owner: string, _ttlMs?: number): Promise<boolean> {
    const node = this.holds.nodes.get(owner);
    if (!node?.holding || node.session.lost) return false;
    const sentAt = monotonicNow();
    const stat = await this.requests.exists(node.session.client, key, node.path);
    if (stat) node.session.heard(sentAt);
    return stat !== null && !node.session.lost;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const node = this.holds.nodes.get(owner);
    this.holds.drop(owner);
    if (!node) return false;
    if (node.session.lost) {
      // Gone with its session, or being deleted in the background (see sessionLost).
      return false;
    }
    try {
      const sentAt = monotonicNow();
      let removed: boolean;
      if (node.holding && node.successor) {
        // Our delete and the hand-over to the next in line, at one zxid; the successor gone, ours alone.
        const outcome = await this.requests.removeHandingOff(node.session.client, key, node.path, node.successor, node.behindSuccessor);
        removed = outcome === 'no-successor' ? await this.requests.remove(node.session.client, key, node.path) : outcome === 'removed';
      } else {
        removed = await this.requests.remove(node.session.client, key, node.path);
      }
      node.session.heard(sentAt);
      return removed && node.holding;
    } catch (error) {
      // Unanswered: the znode may still be there, blocking the line while our session lives.
      this.requests.removeLater(node.session, node.path);
      throw error;
    }
  }

  inspect(key: string): Promise<HeldLock | null> {
    return this.admin.inspect(key);
  }

  listKeys(prefix: string, max: number): Promise<string[]> {
    return this.admin.listKeys(prefix, max);
  }

  forceRelease(key: string): Promise<string | undefined> {
    return this.admin.forceRelease(key);
  }

  /** A read of the prefix within `timeoutMs` (opening a session first if there is none). */
  async ping(timeoutMs: number): Promise<void> {
    await boundedCall({
      backend: this.name,
      operation: 'ping',
      closed: this.closed,
      send: async () => {
        const session = await this.sessions.get('ping');
        return this.requests.rawExists(session.client, this.prefix);
      },
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms`,
    });
  }

  /** Our own connections never keep the process alive (calls in flight do, through their timers). */
  holdProcess(_hold: boolean): void {
    this.sessions.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    // A session being opened closes its new client itself once it sees `closed` (bounded by the
    // connect timeout); creates in flight delete their znodes once answered (bounded by the
    // command timeout) — both before the client goes.
    await this.sessions.settle();
    await Promise.allSettled([...this.acquisition.enqueuing]);
    const nodes = [...this.holds.nodes.values()];
    for (const owner of [...this.holds.nodes.keys()]) this.holds.drop(owner);
    const session = this.sessions.end();
    // Our znodes first (at once for waiters; the engine released its holders before), then the
    // lines we used if they are empty now, so nothing of ours stays behind. Bounded: a server that
    // does not answer leaves the rest to the session's expiry (and empty parents to the next user).
    if (session) await Promise.allSettled(nodes.filter((n) => n.session === session).map((n) => this.requests.removeQuietly(session.client, n.path)));
    // After a lost session there is no current client: the application's is still there; ours is
    // opened once more, only to delete the empty lines.
    await this.sessions.closeWith(session, this.requests.lines.hasParents, (client) => this.requests.lines.reapParents(client, true));
  }

  /** One request, bounded by commandTimeoutMs; refused once closed, except `close()`'s own clean-up. */
  private call<T>(operation: string, key: string, send: () => Promise<T>, closing = false): Promise<T> {
    return boundedCall({
      backend: this.name,
      operation,
      key,
      closed: this.closed && !closing,
      send,
      timeoutMs: this.commandTimeoutMs,
      deadlines: this.deadlines,
      timedOut: () => `no answer within ${this.commandTimeoutMs} ms (commandTimeoutMs)`,
    });
  }
}
