import { monotonicNow } from '../../common/validity.util.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { AcquireResult } from '../lock-backend.interface.js';
import type { LossListeners } from '../loss-listeners.js';
import { TurnWaiters } from '../wait-turn.util.js';
import type { ZooKeeperStatLike } from './zookeeper-client.interface.js';
import type { ZooKeeperRequests } from './zookeeper-requests.js';
import { HELD, type ZooKeeperNode as Node } from './zookeeper-semaphore.js';
import type { ZooKeeperSession } from './zookeeper-session.js';
import type { ZooKeeperSessions } from './zookeeper-sessions.js';

/** node-zookeeper-client's Event.NODE_DATA_CHANGED. */
const NODE_DATA_CHANGED = 3;

export interface ZooKeeperHoldsParts {
  readonly name: string;
  readonly requests: ZooKeeperRequests;
  readonly sessions: ZooKeeperSessions;
  readonly lossListeners: LossListeners;
  /** The znodes are on our own client (closed with a lost session), not the application's. */
  readonly ownsClient: boolean;
}

/**
 * The znodes of one ZooKeeper backend by owner — waiting or holding — and their waiters: grants
 * (with the holder's watch of its own znode), forced releases and lost sessions.
 */
export class ZooKeeperHolds {
  readonly nodes = new Map<string, Node>();
  readonly turns = new TurnWaiters();

  constructor(private readonly parts: ZooKeeperHoldsParts) {}

  /** Until when the session `owner`'s znode lives on is known to live (monotonic). */
  validUntil(owner: string): number | undefined {
    const node = this.nodes.get(owner);
    return node?.holding && !node.session.lost ? node.session.validUntilMs : undefined;
  }

  /** `owner` waits at `node`, its turn told by the deletion of `predecessor`. */
  queue(owner: string, node: Node, predecessor: string): void {
    this.nodes.set(owner, node);
    this.turns.track(owner);
    this.watch(node, predecessor);
  }

  /**
   * Watch only the znode just ahead of ours: its deletion is our cue (not a write of its data: the
   * holder ahead of it handing it the lock, see ZooKeeperBackend.release). Gone already: wake now.
   */
  watch(node: Node, predecessor: string): void {
    this.parts.requests.watch(node.session.client, node.key, `${node.parent}/${predecessor}`, node.watcher).then(
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
  granted(owner: string, node: Node, token: bigint, mark = false): AcquireResult {
    const { requests } = this.parts;
    if (node.session.lost || node.session.validUntilMs <= monotonicNow()) {
      if (this.nodes.get(owner) === node) this.drop(owner);
      requests.removeLater(node.session, node.path);
      throw new LockBackendUnavailableError(
        this.parts.name,
        'acquire',
        'the answer came after the ZooKeeper session it rests on could have expired; not granted',
        { key: node.key },
      );
    }
    node.holding = true;
    this.nodes.set(owner, node);
    node.session.hold(owner);
    // A semaphore's holder marks its znode for its successor (zookeeper-semaphore.ts), before its
    // watch of the znode is set below (one session's requests are served in order).
    if (mark) {
      try {
        node.session.client.setData(node.path, HELD, -1, () => undefined);
      } catch {
        // A client closed under us: the watch below fails too, the successor's re-read decides.
      }
    }
    // Told of a forced release by the znode's deletion (in the background: not on the grant's
    // path). A waiter woken by a hand-over set this watch already, with its read of its znode.
    if (!node.ownWatched) this.watchOwn(owner, node);
    return { acquired: true, token };
  }

  /**
   * Read `owner`'s znode (null: gone), leaving a data watch on it: while it waits, the watch tells
   * it of its znode's deletion (it starts over) and is spent by the hand-over's write; while it
   * holds, a deletion is a forced release (or its session's end), and nothing else writes the
   * znode but ourselves (a grant's record, a semaphore's mark) — a change of data only sets the
   * watch again.
   */
  async readOwn(owner: string, node: Node): Promise<{ data: Buffer | undefined; stat: ZooKeeperStatLike } | null> {
    node.ownWatcher ??= (event: unknown) => {
      node.ownWatched = false;
      node.ownEvents = (node.ownEvents ?? 0) + 1;
      if (this.nodes.get(owner) !== node) return;
      if ((event as { getType?(): number }).getType?.() === NODE_DATA_CHANGED) {
        if (node.holding) this.watchOwn(owner, node);
      } else if (node.holding) {
        this.gone(owner, node);
      } else {
        node.watcher();
      }
    };
    const events = node.ownEvents ?? 0;
    const own = await this.parts.requests.readOwn(node.session.client, node.key, node.path, node.ownWatcher);
    // Set, unless an event came since we sent the read: the client may have fired (and so spent)
    // the watch this read set right after its answer, before we run again here.
    if (own && (node.ownEvents ?? 0) === events) node.ownWatched = true;
    return own;
  }

  private watchOwn(owner: string, node: Node): void {
    this.readOwn(owner, node).then(
      (own) => own || this.gone(owner, node),
      () => undefined,
    );
  }

  /** A holder's znode is gone: force-released — or, past the time its session is known to live, a lost session. */
  private gone(owner: string, node: Node): void {
    if (this.nodes.get(owner) !== node || !node.holding || node.session.lost) return;
    // Past the time our session is known to live (a pause, a cut link): the server may have
    // expired it and deleted its znodes — that is a lost session, not somebody's forceRelease().
    // (A process stopped past its session hears this watch before its expiry timer fires.)
    if (node.session.validUntilMs <= monotonicNow()) {
      this.sessionLost(node.session, `our znode is gone and the ZooKeeper session could have expired (no answer within its ${node.session.grantedTimeoutMs} ms timeout)`);
      return;
    }
    this.forced(owner);
  }

  /** `owner`'s znode was deleted by a forced release: if it holds here, it holds no more. */
  forced(owner: string): void {
    if (!this.nodes.get(owner)?.holding) return;
    this.drop(owner);
    this.parts.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
  }

  /** Forget `owner` here (its znode, if any, is the caller's to delete). */
  drop(owner: string): void {
    const node = this.nodes.get(owner);
    this.turns.forget(owner);
    if (!node) return;
    this.nodes.delete(owner);
    if (node.holding) node.session.unhold(owner);
  }

  /** The session's znodes are gone (or cannot be trusted): its holders lose, its waiters start over. */
  sessionLost(session: ZooKeeperSession, detail: string): void {
    // A client of ours is closed with it: that deletes every znode of the session at once, if the
    // server hears us.
    if (!this.parts.sessions.retire(session)) return;
    const mine = [...this.nodes.entries()].filter(([, n]) => n.session === session);
    if (!this.parts.ownsClient) {
      // The application's client may still be connected: delete what it can (the session may well
      // be alive), and keep using it (a new session record on the same client).
      for (const [, node] of mine) this.parts.requests.removeLater(session, node.path);
    }
    for (const [owner, node] of mine) {
      if (node.holding) {
        this.drop(owner);
        this.parts.lossListeners.tell(owner, detail);
      } else {
        this.turns.wake(owner);
      }
    }
  }
}
