// Over 250 lines on purpose: the acquire protocol (create and read in one write, re-check, watch
// the predecessor) and its handling of lost sessions and of writes with an unknown outcome read
// best together. Paths, the sessions (opening, validity, replacing) and the client's requests live
// in the files beside it.
import { DEFAULT_DRIFT_FACTOR } from '../../common/checks.util.js';
import { LossListeners } from '../loss-listeners.js';
import { monotonicNow } from '../../common/validity.util.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { AnswerDeadlines } from '../answer-deadlines.js';
import { boundedCall } from '../backend-call.util.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { TurnWaiters } from '../wait-turn.util.js';
import { ZOOKEEPER_CAPABILITIES, ZOOKEEPER_DEFAULTS, type ZooKeeperBackendConfig } from './zookeeper-backend.options.js';
import { ZK_ERRORS, zkErrorCode } from './zookeeper-client.interface.js';
import { ancestry, inLineOrder, lockParent, nodeNamePrefix, permitsOfNode } from './zookeeper-paths.util.js';
import { ZooKeeperRequests, type Line } from './zookeeper-requests.js';
import { HELD, ZooKeeperSemaphore, type Placement, type ZooKeeperNode as Node } from './zookeeper-semaphore.js';
import type { ZooKeeperSession } from './zookeeper-session.js';
import { ZooKeeperSessions } from './zookeeper-sessions.js';
import { ZooKeeperAdmin } from './zookeeper-admin.js';
import { permitsMismatch } from '../semaphore.util.js';

/** A queued waiter re-reads its place this often even without a watch event. */
const RECHECK_MS = 5_000;

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
 * czxid), holds with its czxid: nobody was ahead at the create, so every earlier holder's znode,
 * and its token, came before. Any other grant — a waiter's, or a first read that saw the line
 * change — is recorded by one write to our znode (its token that write's zxid, larger than every
 * zxid before it): a czxid dating from when we joined the line can be smaller than a token granted
 * on another key meanwhile, and a multi-key lease's token is the largest of its keys'. So every
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
  private readonly nodes = new Map<string, Node>();
  private readonly turns = new TurnWaiters();
  private readonly lossListeners = new LossListeners();
  private readonly sessions: ZooKeeperSessions;
  /** inspect(), listKeys(), forceRelease(). */
  private readonly admin: ZooKeeperAdmin;
  /** Requests started over once already because their new znode was force-released before its grant was recorded. */
  private readonly restarted = new WeakSet<AcquireRequest>();
  private closed = false;
  /** Creates (with their read of the line) in flight. */
  private readonly enqueuing = new Set<Promise<unknown>>();
  /** The prefix's znodes were there at our last create. */
  private prefixKnown = false;
  /** The plain lock's znodes: `<owner>-<sequence>`, first in line holds. */
  private readonly plain: Placement = {
    namePrefix: (owner) => nodeNamePrefix(owner, this.name),
    stamp: false,
    decide: (request, node, line, order, place) => this.decide(request, node, line, order, place),
  };
  /** Semaphore views by permits (zookeeper-semaphore.ts): the same sessions, znodes and waiters. */
  private readonly views = new Map<number, ZooKeeperSemaphore>();

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
      lost: (session, detail) => this.sessionLost(session, detail),
    });
    this.admin = new ZooKeeperAdmin({
      name: this.name,
      prefix: this.prefix,
      requests: this.requests,
      call: (operation, key, send, closing) => this.call(operation, key, send, closing),
      session: (key) => this.sessions.get(key),
      parentOf: (key) => this.parentOf(key),
      forced: (owner) => this.forced(owner),
    });
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  /** Until when the session `owner`'s znode lives on is known to live (monotonic). */
  validUntil(owner: string): number | undefined {
    const node = this.nodes.get(owner);
    return node?.holding && !node.session.lost ? node.session.validUntilMs : undefined;
  }

  /** This backend's semaphores (`permits` ≥ 2): lines of the same kind, the first `permits` hold. */
  semaphore(permits: number): ZooKeeperSemaphore {
    let view = this.views.get(permits);
    if (!view) {
      view = new ZooKeeperSemaphore(
        {
          backend: this,
          requests: this.requests,
          nodes: this.nodes,
          turns: this.turns,
          call: (operation, key, send, closing) => this.call(operation, key, send, closing),
          enqueue: (request, placement) => this.enqueue(request, placement),
          readLine: (owner, node) => this.readLine(owner, node),
          leave: (node) => this.leave(node),
          granted: (owner, node, token, mark) => this.granted(owner, node, token, mark),
          drop: (owner) => this.drop(owner),
        },
        permits,
      );
      this.views.set(permits, view);
    }
    return view;
  }

  /** The parent znode of one lock's line. */
  parentOf(key: string): string {
    return lockParent(this.prefix, key, this.name);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const node = this.nodes.get(request.owner);
    if (node && !node.holding) {
      if (!node.session.lost) {
        const result = await this.recheck(request, node);
        if (result) return result;
      }
      this.drop(request.owner);
    }
    return this.enqueue(request, this.plain);
  }

  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.turns.wait(owner, Math.min(timeoutMs, RECHECK_MS), signal);
  }

  /**
   * `ttlMs` is not sent: znodes have no expiry of their own (see the class comment). Our znode
   * existing now, on a session not lost, is all an extend can check.
   */
  async extend(key: string, owner: string, _ttlMs?: number): Promise<boolean> {
    const node = this.nodes.get(owner);
    if (!node?.holding || node.session.lost) return false;
    const sentAt = monotonicNow();
    const stat = await this.requests.exists(node.session.client, key, node.path);
    if (stat) node.session.heard(sentAt);
    return stat !== null && !node.session.lost;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const node = this.nodes.get(owner);
    this.drop(owner);
    if (!node) return false;
    if (node.session.lost) {
      // Gone with its session, or being deleted in the background (see sessionLost).
      return false;
    }
    try {
      const sentAt = monotonicNow();
      const removed = await this.requests.remove(node.session.client, key, node.path);
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
    await Promise.allSettled([...this.enqueuing]);
    const nodes = [...this.nodes.values()];
    for (const owner of [...this.nodes.keys()]) this.drop(owner);
    const session = this.sessions.end();
    // Our znodes first (at once for waiters; the engine released its holders before), then the
    // lines we used if they are empty now, so nothing of ours stays behind. Bounded: a server that
    // does not answer leaves the rest to the session's expiry (and empty parents to the next user).
    if (session) await Promise.allSettled(nodes.filter((n) => n.session === session).map((n) => this.requests.removeQuietly(session.client, n.path)));
    // After a lost session there is no current client: the application's is still there; ours is
    // opened once more, only to delete the empty lines.
    await this.sessions.closeWith(session, this.requests.hasParents, (client) => this.requests.reapParents(client, true));
  }

  /**
   * First attempt of an owner: create its znode and read the line in one write (the read comes
   * after the create on the server: one session's requests are served in order), then let the
   * placement (the plain lock's, or a semaphore's) decide.
   */
  private async enqueue(request: AcquireRequest, placement: Placement, retried = false): Promise<AcquireResult> {
    const { key, owner } = request;
    const session = await this.sessions.get(key);
    const parent = this.parentOf(key);
    const namePrefix = placement.namePrefix(owner);
    // A line not used here lately may have no parent yet: create it (and, the first time, the
    // prefix) in the same write rather than after a failed create.
    const ensure = this.requests.knows(parent) ? [] : this.prefixKnown ? [parent] : ancestry(parent);
    const sentAt = monotonicNow();
    let path: string;
    let line: Line;
    const creating = this.requests.createAndRead(session, key, parent, namePrefix, ensure, placement.stamp);
    this.enqueuing.add(creating);
    try {
      [path, line] = await creating;
      this.prefixKnown = true;
    } catch (error) {
      if (!retried && zkErrorCode(error) === ZK_ERRORS.NO_NODE) {
        // Deleted since we last used it (an idle line reaped by another process, the prefix by hand).
        this.prefixKnown = false;
        await this.requests.ensurePath(session.client, key, ancestry(parent));
        return this.enqueue(request, placement, true);
      }
      throw error;
    } finally {
      this.enqueuing.delete(creating);
    }
    if (this.closed) {
      // Closed while the create was in flight: its znode must not outlive us.
      await this.requests.removeQuietly(session.client, path);
      throw new LockBackendUnavailableError(this.name, 'acquire', 'the backend is closed (application shutting down)', { key });
    }
    session.heard(sentAt);
    const name = path.slice(parent.length + 1);
    const order = inLineOrder(line.children);
    const place = order.indexOf(name);
    const node: Node = { key, parent, path, name, session, holding: false, czxid: line.czxid, watcher: () => this.turns.wake(owner) };
    if (session.lost || place < 0 || (!placement.stamp && line.czxid === undefined)) {
      // The session ended under us (or our znode is gone already): start again on a new one.
      this.requests.removeLater(session, path);
      if (retried) throw new LockBackendUnavailableError(this.name, 'acquire', 'the ZooKeeper session was lost while acquiring', { key });
      return this.enqueue(request, placement, true);
    }
    this.requests.touch(parent);
    return placement.decide(request, node, line, order, place);
  }

  /**
   * The plain lock's first read: first in line, ours, with our znode's czxid as the token. Else a
   * semaphore's znode ahead refuses us (permits 1 against its), a single try deletes its znode
   * again, and a waiter watches the one ahead.
   */
  private decide(request: AcquireRequest, node: Node, line: Line, order: string[], place: number): AcquireResult | Promise<AcquireResult> {
    const { key, owner, queue } = request;
    if (place === 0 && line.pzxid === node.czxid) return this.granted(owner, node, node.czxid);
    if (place === 0) return this.firstRecorded(request, node);
    // The contended path only: a znode ahead is never added after this read.
    for (let i = 0; i < place; i++) {
      const permits = permitsOfNode(order[i]);
      if (permits !== 1) return this.leave(node).then(() => Promise.reject(permitsMismatch(key, permits, 1)), () => Promise.reject(permitsMismatch(key, permits, 1)));
    }
    // A single try leaves no trace: its znode goes before we answer "busy".
    if (!queue) return this.leave(node).then(() => ({ acquired: false }));
    this.nodes.set(owner, node);
    this.turns.track(owner);
    this.watch(node, order[place - 1]);
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
      this.requests.removeLater(node.session, node.path);
      throw error;
    }
    if (result) return result;
    this.requests.removeLater(node.session, node.path);
    if (!node.session.lost && !this.restarted.has(request)) {
      this.restarted.add(request);
      return this.enqueue(request, this.plain, true);
    }
    throw new LockBackendUnavailableError(this.name, 'acquire', 'our znode was gone (its session lost, or force-released) before its grant was recorded', { key: node.key });
  }

  /** Delete a znode that is not to stay; unanswered, in the background (and the error thrown). */
  private async leave(node: Node): Promise<void> {
    try {
      await this.requests.remove(node.session.client, node.key, node.path);
    } catch (error) {
      this.requests.removeLater(node.session, node.path);
      throw error;
    }
  }

  /** A queued owner's next attempt: read the line. undefined: our znode is gone, start over. */
  private async recheck(request: AcquireRequest, node: Node): Promise<AcquireResult | undefined> {
    const read = await this.readLine(request.owner, node);
    if (!read) return undefined;
    if (read.place === 0) return this.recordedGrant(request.owner, node);
    this.watch(node, read.order[read.place - 1]);
    return { acquired: false };
  }

  /**
   * First in line at a read that cannot vouch for our czxid as the token: the grant is recorded
   * by one write to our znode, its zxid the token (see the class comment) — written before the
   * holder's own watch of its znode is set up, so that watch never sees it. undefined: our znode
   * (or its session) is gone, start over.
   */
  private async recordedGrant(owner: string, node: Node): Promise<AcquireResult | undefined> {
    const sentAt = monotonicNow();
    const token = await this.requests.recordGrant(node.session.client, node.key, node.path);
    if (token === undefined || node.session.lost) {
      if (this.nodes.get(owner) === node) this.drop(owner);
      return undefined;
    }
    node.session.heard(sentAt);
    return this.granted(owner, node, token);
  }

  /** Read the line a queued owner is in; undefined: its znode (or its session) is gone. */
  private async readLine(owner: string, node: Node): Promise<{ line: Line; order: string[]; place: number } | undefined> {
    const sentAt = monotonicNow();
    const line = await this.requests.readLine(node.session.client, node.key, node.parent);
    if (!line || node.session.lost || this.nodes.get(owner) !== node) return undefined;
    node.session.heard(sentAt);
    const order = inLineOrder(line.children);
    const place = order.indexOf(node.name);
    return place < 0 ? undefined : { line, order, place };
  }

  /** Watch only the znode just ahead of ours: its deletion is our cue. Gone already: wake now. */
  private watch(node: Node, predecessor: string): void {
    this.requests.watch(node.session.client, node.key, `${node.parent}/${predecessor}`, node.watcher).then(
      (exists) => {
        if (!exists) node.watcher();
      },
      () => node.watcher(),
    );
  }

  /**
   * The line's read found us first. Only a session known to be alive now can vouch for it: an
   * answer that came back after the session could have expired (a slow link, a long pause) may
   * describe a line the server has since changed — another holder may be in already.
   */
  private granted(owner: string, node: Node, token: bigint, mark = false): AcquireResult {
    if (node.session.lost || node.session.validUntilMs <= monotonicNow()) {
      if (this.nodes.get(owner) === node) this.drop(owner);
      this.requests.removeLater(node.session, node.path);
      throw new LockBackendUnavailableError(
        this.name,
        'acquire',
        'the answer came after the ZooKeeper session it rests on could have expired; not granted',
        { key: node.key },
      );
    }
    node.holding = true;
    this.nodes.set(owner, node);
    node.session.hold(owner);
    // Told of a forced release by the znode's deletion (in the background: not on the grant's path).
    const gone = (): void => {
      if (this.nodes.get(owner) !== node || node.session.lost) return;
      // Past the time our session is known to live (a pause, a cut link): the server may have
      // expired it and deleted its znodes — that is a lost session, not somebody's forceRelease().
      // (A process stopped past its session hears this watch before its expiry timer fires.)
      if (node.session.validUntilMs <= monotonicNow()) {
        this.sessionLost(node.session, `our znode is gone and the ZooKeeper session could have expired (no answer within its ${node.session.grantedTimeoutMs} ms timeout)`);
        return;
      }
      this.forced(owner);
    };
    // A semaphore's holder marks its znode for its successor (zookeeper-semaphore.ts), sent before
    // the watch below so that the watch never sees it.
    if (mark) {
      try {
        node.session.client.setData(node.path, HELD, -1, () => undefined);
      } catch {
        // A client closed under us: the watch below fails too, the successor's re-read decides.
      }
    }
    this.requests.watch(node.session.client, node.key, node.path, gone).then((exists) => exists || gone(), () => undefined);
    return { acquired: true, token };
  }

  /** `owner`'s znode was deleted by a forced release: if it holds here, it holds no more. */
  private forced(owner: string): void {
    if (!this.nodes.get(owner)?.holding) return;
    this.drop(owner);
    this.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
  }

  /** Forget `owner` here (its znode, if any, is the caller's to delete). */
  private drop(owner: string): void {
    const node = this.nodes.get(owner);
    this.turns.forget(owner);
    if (!node) return;
    this.nodes.delete(owner);
    if (node.holding) node.session.unhold(owner);
  }

  /** The session's znodes are gone (or cannot be trusted): its holders lose, its waiters start over. */
  private sessionLost(session: ZooKeeperSession, detail: string): void {
    // A client of ours is closed with it: that deletes every znode of the session at once, if the
    // server hears us.
    if (!this.sessions.retire(session)) return;
    const mine = [...this.nodes.entries()].filter(([, n]) => n.session === session);
    if (!this.config.ownsClient) {
      // The application's client may still be connected: delete what it can (the session may well
      // be alive), and keep using it (a new session record on the same client).
      for (const [, node] of mine) this.requests.removeLater(session, node.path);
    }
    for (const [owner, node] of mine) {
      if (node.holding) {
        this.drop(owner);
        this.lossListeners.tell(owner, detail);
      } else {
        this.turns.wake(owner);
      }
    }
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
