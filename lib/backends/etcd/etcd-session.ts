import type { EtcdLeaseLike } from '../../interfaces/etcd-client.interface.js';
import { monotonicNow, validUntil } from '../../lease/validity.util.js';

/**
 * One etcd lease shared by every lock key this backend writes while it lives (etcd's own
 * concurrency recipe). Its validity is tracked on the monotonic clock from the moment each
 * keep-alive was *sent*: when no keep-alive has succeeded by then, the session is presumed lost
 * even if etcd3 has not said so yet (it measures with `Date.now()` and waits 2 × ttl).
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
  private readonly fired: number[] = [];
  private timer?: NodeJS.Timeout;

  constructor(
    readonly lease: EtcdLeaseLike,
    private readonly ttlSeconds: number,
    private readonly driftFactor: number,
    grantSentAt: number,
    private readonly onPresumedLost: (session: EtcdSession, detail: string) => void,
  ) {
    this.until = validUntil(grantSentAt, ttlSeconds * 1000, driftFactor);
    lease.on('keepaliveFired', () => this.fired.push(monotonicNow()));
    lease.on('keepaliveSucceeded', (response: { TTL?: string }) => this.renewed(Number(response?.TTL ?? ttlSeconds)));
    // A new keep-alive stream: earlier requests will never be answered.
    lease.on('keepaliveEstablished', () => (this.fired.length = 0));
    lease.on('keepaliveFailed', () => (this.fired.length = 0));
  }

  /** Start watching validity once the lease is granted. */
  start(id: string): void {
    this.id = id;
    this.schedule();
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
    clearTimeout(this.timer);
  }

  private renewed(ttlSeconds: number): void {
    const sentAt = this.fired.shift();
    if (sentAt === undefined || this.lost || ttlSeconds <= 0) return;
    this.until = Math.max(this.until, validUntil(sentAt, ttlSeconds * 1000, this.driftFactor));
    this.schedule();
  }

  private schedule(): void {
    clearTimeout(this.timer);
    if (this.lost) return;
    const remaining = this.until - monotonicNow();
    const expire = (): void =>
      this.onPresumedLost(this, `no keep-alive of the ${this.ttlSeconds} s session lease succeeded in time`);
    if (remaining <= 0) {
      expire();
      return;
    }
    this.timer = setTimeout(expire, Math.ceil(remaining));
    this.timer.unref();
  }
}
