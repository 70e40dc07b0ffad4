import type { EtcdLeaseLike } from './etcd-client.interface.js';
import { monotonicNow } from '../../common/validity.util.js';
import { Heartbeat, SessionValidity } from '../session-validity.js';

/**
 * One etcd lease shared by every lock key this backend writes while it lives (etcd's own
 * concurrency recipe). Its validity is tracked on the monotonic clock from the moment each
 * keep-alive was *sent* (the kit's SessionValidity): when no keep-alive has succeeded by then, the
 * session is presumed lost.
 *
 * Keep-alives are ours, not etcd3's: one unary request every ttl/3 with a deadline, on an unref'd
 * timer (the kit's Heartbeat). etcd3's own keep-alive stream is only half-closed when the lease is
 * closed, so with etcd unreachable it kept a closed application's process alive; ours end with
 * their deadline.
 */
export class EtcdSession {
  /** Owners whose lock key is attached to this lease and who hold the lock. */
  readonly holders = new Set<string>();
  /** Owners queued with a key attached to this lease. */
  readonly waiters = new Set<string>();
  /** Acquire writes on this lease whose answer has not come yet. */
  pending = 0;
  /**
   * No new keys go on a retired session: a write on it had an unknown outcome, so a key of ours
   * may land on it late. It is revoked (taking any such key with it) once nobody uses it.
   */
  retired = false;
  id = '';
  lost = false;
  private readonly validity: SessionValidity;
  private readonly keepAlives: Heartbeat;

  constructor(
    readonly lease: EtcdLeaseLike,
    ttlSeconds: number,
    driftFactor: number,
    grantSentAt: number,
    private readonly onPresumedLost: (session: EtcdSession, detail: string) => void,
    /** One keep-alive request (bounded by its own deadline); resolves with the granted TTL in seconds. */
    private readonly keepAlive: () => Promise<number>,
  ) {
    this.validity = new SessionValidity(ttlSeconds * 1000, driftFactor, grantSentAt, () =>
      this.onPresumedLost(this, `no keep-alive of the ${ttlSeconds} s session lease succeeded in time`),
    );
    this.keepAlives = new Heartbeat(Math.max(100, Math.floor((ttlSeconds * 1000) / 3)), () => this.sendKeepAlive());
  }

  /** Start keeping it alive and watching its validity once the lease is granted. */
  start(id: string): void {
    this.id = id;
    if (this.lost) return;
    this.validity.arm();
    this.keepAlives.start();
  }

  private async sendKeepAlive(): Promise<void> {
    if (this.lost) return;
    const sentAt = monotonicNow();
    try {
      const ttlSeconds = await this.keepAlive();
      if (!this.lost && ttlSeconds > 0) this.validity.heard(sentAt, ttlSeconds * 1000);
    } catch (error) {
      // etcd answered that the lease is gone (revoked, expired): no point waiting for the deadline.
      if (/lease.*(not found|invalid|expired)|EtcdLeaseInvalid/i.test(`${(error as Error)?.name} ${(error as Error)?.message}`)) {
        this.keepAlives.stop();
        this.onPresumedLost(this, `the session lease is gone on the server: ${(error as Error)?.message ?? error}`);
      }
      // Unanswered: validity runs out on its own unless a later keep-alive gets through.
    }
  }

  remainingMs(): number {
    return this.validity.validUntilMs - monotonicNow();
  }

  /**
   * Monotonic time (`performance.now()`) until which the lease is known to live on the server:
   * the send time of the last answered keep-alive (or of the grant) + its TTL, minus drift.
   */
  get validUntilMs(): number {
    return this.validity.validUntilMs;
  }

  /** Nobody holds, waits or is writing on it. */
  get idle(): boolean {
    return this.holders.size === 0 && this.waiters.size === 0 && this.pending === 0;
  }

  /** Stop the timers (the session is over either way). */
  end(): void {
    this.lost = true;
    this.validity.disarm();
    this.keepAlives.stop();
  }
}
