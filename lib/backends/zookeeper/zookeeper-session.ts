import { monotonicNow } from '../../common/validity.util.js';
import { Heartbeat, SessionValidity } from '../session-validity.js';
import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';

/**
 * One ZooKeeper session as this backend sees it: the client it runs on, the timeout the server
 * granted, and how long it is known to live. Every znode of ours is ephemeral, bound to the
 * session that created it, so a lease can never be trusted past the session.
 *
 * The server expires a session when it has heard nothing from the client for the timeout. The
 * latest request of ours that was answered reached the server after we sent it: the session lives
 * at least until that send time + the timeout (minus drift) — `validUntilMs`. While anything is
 * held, a cheap read every third of the timeout keeps that bound fresh (the client's own pings
 * keep the session alive, but tell us nothing). If the bound passes unrenewed (a long pause, a
 * cut-off link), the session is presumed lost: holders are told at once, before the server's own
 * expiry could let another holder in.
 */
export class ZooKeeperSession {
  /** Owners holding a lock through a znode of this session. */
  readonly holders = new Set<string>();
  /** Set once the session is over or presumed over: none of its znodes may be trusted. */
  lost = false;
  /** Armed while anything is held (see the kit's SessionValidity). */
  private readonly validity: SessionValidity;
  private heartbeat?: Heartbeat;

  /** The session timeout the server granted (the one asked for until the connection says). */
  get grantedTimeoutMs(): number {
    return this.validity.ttlMs;
  }

  constructor(
    readonly client: ZooKeeperClientLike,
    /** The session timeout the server granted (ms). */
    timeoutMs: number,
    driftFactor: number,
    /** When the request that proved the session alive was sent. */
    heardSentAt: number,
    private readonly onLost: (session: ZooKeeperSession, detail: string) => void,
    /** One read, bounded by the command timeout. */
    private readonly ping: () => Promise<unknown>,
  ) {
    this.validity = new SessionValidity(timeoutMs, driftFactor, heardSentAt, () =>
      this.onLost(this, `no answer from ZooKeeper within the ${this.validity.ttlMs} ms session timeout`),
    );
  }

  /** Monotonic time until which the server keeps this session (and so our znodes) at least. */
  get validUntilMs(): number {
    return this.validity.validUntilMs;
  }

  /** A request sent at `sentAt` was answered on this session. */
  heard(sentAt: number): void {
    if (this.lost) return;
    this.regranted();
    this.validity.heard(sentAt);
  }

  /**
   * The client (re)connected: a server may have granted a shorter timeout than before (a reconnect
   * to another member, a server restarted with a smaller maxSessionTimeout), and from then on it
   * ends the session that much sooner after it last heard from us — so the bound shrinks at once,
   * counted from the latest answered request, and a holder past it is told now.
   */
  regranted(): void {
    if (!this.lost) this.validity.shrink(this.client.getSessionTimeout());
  }

  /** `owner` holds a lock on this session: keep the validity bound fresh while anybody does. */
  hold(owner: string): void {
    this.holders.add(owner);
    if (this.lost) return;
    this.validity.arm();
    if (!this.heartbeat) {
      const every = Math.max(50, Math.floor(this.validity.ttlMs / 3));
      this.heartbeat = new Heartbeat(every, () => this.beat(every));
      this.heartbeat.start();
    }
  }

  unhold(owner: string): void {
    this.holders.delete(owner);
    if (this.holders.size === 0) this.quiet();
  }

  /** The session is over: stop its timers (the caller tells its holders). */
  end(): void {
    this.lost = true;
    this.quiet();
  }

  private quiet(): void {
    this.validity.disarm();
    this.heartbeat?.stop();
    this.heartbeat = undefined;
  }

  private async beat(every: number): Promise<void> {
    // A request answered within the last period already renewed the bound.
    if (this.lost || this.validity.freshWithin(every)) return;
    const sentAt = monotonicNow();
    // Unanswered (it throws): the bound runs out on its own unless a later request gets through.
    await this.ping();
    this.heard(sentAt);
  }
}
