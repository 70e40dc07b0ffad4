import { monotonicNow, validUntil } from '../common/validity.util.js';

/** What the watchdog renews: a held lease's ttl, validity and extend. */
export interface Renewable {
  readonly held: boolean;
  /** The ttl in force. */
  readonly ttlMs: number;
  /** Monotonic time until which the lease may be trusted. */
  readonly trustedUntil: number;
  readonly driftFactor: number;
  extend(ttlMs: number): Promise<void>;
  renewed(): void;
  renewalFailed(error: unknown): void;
}

/**
 * The watchdog (off by default): renew the lease every ttl/3 until it is released or lost, or
 * `maxHold` is reached — the last renewal ends the lease exactly there. A reentrant acquisition
 * may start it or lengthen its maxHold, never shorten it.
 */
export class LeaseWatchdog {
  /** The maxHold in force, or undefined while there is no watchdog. */
  private maxHold: number | undefined;
  /** Monotonic time it renews up to. */
  private renewUntil: number | undefined;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly lease: Renewable,
    maxHold: number | undefined,
    startedAt: number,
  ) {
    if (maxHold !== undefined) this.raise(maxHold, startedAt);
  }

  /** Renew for `maxHold` from `from` if that is longer than what it renews for now. */
  raise(maxHold: number, from = monotonicNow()): void {
    if (this.maxHold !== undefined && maxHold <= this.maxHold) return;
    const running = this.renewUntil !== undefined;
    this.maxHold = maxHold;
    this.renewUntil = Math.max(this.renewUntil ?? 0, from + maxHold);
    if (!running) this.schedule();
  }

  stop(): void {
    clearTimeout(this.timer);
  }

  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.renew(), Math.max(1, Math.floor(this.lease.ttlMs / 3)));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    const lease = this.lease;
    if (!lease.held || this.renewUntil === undefined) return;
    const holdLeft = this.renewUntil - monotonicNow();
    // Never renew past maxHold: the last renewal ends the lease exactly there.
    const ttl = Math.min(lease.ttlMs, Math.floor(holdLeft));
    if (ttl <= 0) return;
    if (validUntil(monotonicNow(), ttl, lease.driftFactor) <= lease.trustedUntil) {
      // A renewal would not lengthen the lease (a reentrant acquisition raised it further): never
      // shorten it. Look again later while the watchdog has time left.
      if (ttl === lease.ttlMs) this.schedule();
      return;
    }
    try {
      await lease.extend(ttl);
      lease.renewed();
    } catch (error) {
      if (lease.held) lease.renewalFailed(error);
    }
    if (lease.held && ttl === lease.ttlMs) this.schedule();
  }
}
