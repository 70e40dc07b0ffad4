import type { EtcdLeaseLike } from './etcd-client.interface.js';
import { DeadlineTimer } from '../../common/deadline-timer.js';
import { monotonicNow, validUntil } from '../../common/validity.util.js';

/**
 * One etcd lease shared by every lock key this backend writes while it lives (etcd's own
 * concurrency recipe). Its validity is tracked on the monotonic clock from the moment each
 * keep-alive was *sent*: when no keep-alive has succeeded by then, the session is presumed lost.
 *
 * Keep-alives are ours, not etcd3's: one unary request every ttl/3 with a deadline, on an unref'd
 * timer. etcd3's own keep-alive stream is only half-closed when the lease is closed, so with etcd
 * unreachable it kept a closed application's process alive; ours end with their deadline.
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
  private until: number;
  private readonly expiry = new DeadlineTimer(() =>
    this.onPresumedLost(this, `no keep-alive of the ${this.ttlSeconds} s session lease succeeded in time`),
  );
  private keepaliveTimer?: NodeJS.Timeout;

  constructor(
    readonly lease: EtcdLeaseLike,
    private readonly ttlSeconds: number,
    private readonly driftFactor: number,
    grantSentAt: number,
    private readonly onPresumedLost: (session: EtcdSession, detail: string) => void,
    /** One keep-alive request (bounded by its own deadline); resolves with the granted TTL in seconds. */
    private readonly keepAlive: () => Promise<number>,
  ) {
    this.until = validUntil(grantSentAt, ttlSeconds * 1000, driftFactor);
  }

  /** Start keeping it alive and watching its validity once the lease is granted. */
  start(id: string): void {
    this.id = id;
    this.schedule();
    this.scheduleKeepAlive();
  }

  private scheduleKeepAlive(): void {
    if (this.lost) return;
    this.keepaliveTimer = setTimeout(() => void this.sendKeepAlive(), Math.max(100, Math.floor((this.ttlSeconds * 1000) / 3)));
    this.keepaliveTimer.unref();
  }

  private async sendKeepAlive(): Promise<void> {
    if (this.lost) return;
    const sentAt = monotonicNow();
    try {
      this.renewed(await this.keepAlive(), sentAt);
    } catch (error) {
      // etcd answered that the lease is gone (revoked, expired): no point waiting for the deadline.
      if (/lease.*(not found|invalid|expired)|EtcdLeaseInvalid/i.test(`${(error as Error)?.name} ${(error as Error)?.message}`)) {
        this.onPresumedLost(this, `the session lease is gone on the server: ${(error as Error)?.message ?? error}`);
        return;
      }
      // Unanswered: validity runs out on its own unless a later keep-alive gets through.
    }
    this.scheduleKeepAlive();
  }

  remainingMs(): number {
    return this.until - monotonicNow();
  }

  /**
   * Monotonic time (`performance.now()`) until which the lease is known to live on the server:
   * the send time of the last answered keep-alive (or of the grant) + its TTL, minus drift.
   */
  get validUntilMs(): number {
    return this.until;
  }

  /** Nobody holds, waits or is writing on it. */
  get idle(): boolean {
    return this.holders.size === 0 && this.waiters.size === 0 && this.pending === 0;
  }

  /** Stop the timer (the session is over either way). */
  end(): void {
    this.lost = true;
    this.expiry.clear();
    clearTimeout(this.keepaliveTimer);
  }

  private renewed(ttlSeconds: number, sentAt: number): void {
    if (this.lost || !(ttlSeconds > 0)) return;
    this.until = Math.max(this.until, validUntil(sentAt, ttlSeconds * 1000, this.driftFactor));
    this.schedule();
  }

  private schedule(): void {
    if (this.lost) return this.expiry.clear();
    this.expiry.set(this.until);
  }
}
