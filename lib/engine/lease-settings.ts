import { monotonicNow } from '../common/validity.util.js';
import { LockAtLeast } from './lease-at-least.js';
import type { LeasePolicy } from './lease-policy.js';
import { LeaseWatchdog } from './lease-watchdog.js';

/** What a lease's settings act on: the lease itself. */
export interface SettingsHost {
  readonly held: boolean;
  /** Monotonic time until which the lease may be trusted now. */
  readonly trustedUntil: number;
  readonly driftFactor: number;
  /** Owner-checked extend to `ttlMs`, the key kept `lockDelay` longer on the server. */
  extend(ttlMs: number, lockDelay: number): Promise<void>;
  /** @throws LeaseLostError the lease is no longer held */
  assertHeld(): void;
  renewed(): void;
  renewalFailed(error: unknown): void;
}

/**
 * A lease's settings in force: those it was acquired with (ttl, lock-delay, lockAtLeastFor, the
 * watchdog's maxHold), raised — never lowered — by the reentrant acquisitions nested in it.
 */
export class LeaseSettings {
  /** The ttl in force. */
  ttl: number;
  lockDelayMs: number;
  readonly atLeast: LockAtLeast;
  /** Made when a watchdog is first asked for (most leases have none). */
  watchdog?: LeaseWatchdog;

  constructor(
    private readonly lease: SettingsHost,
    policy: LeasePolicy,
    ttlMs: number,
    acquiredAt: number,
  ) {
    this.ttl = ttlMs;
    this.lockDelayMs = policy.lockDelay;
    this.atLeast = new LockAtLeast(policy.lockAtLeastFor, acquiredAt);
    const maxHold = policy.watchdog?.maxHold;
    if (maxHold !== undefined) this.watchdog = this.makeWatchdog(maxHold, acquiredAt);
  }

  /**
   * A reentrant acquisition nested in the lease asks for `ttl` and `policy`: it gets them. Every
   * setting it asks for that is longer than the lease's is raised to it, counted from now — never
   * lowered: a longer ttl or lockDelay (one owner-checked extend, before the nested work starts),
   * the watchdog up to its maxHold, its lockAtLeastFor. Settings no longer than the lease's leave
   * it as it stands (the nested work shares it, like the outer work does: no round trip).
   * Returns the extend in flight, or undefined when no round trip was needed (all done already).
   */
  raise(ttl: number, policy: LeasePolicy): Promise<void> | undefined {
    if (ttl <= this.ttl && policy.lockDelay <= this.lockDelayMs) {
      this.raiseLocally(policy);
      return undefined;
    }
    return (async () => {
      const newTtl = Math.max(ttl, this.ttl);
      const newDelay = Math.max(policy.lockDelay, this.lockDelayMs);
      // Never shorter than the validity the lease already has (an extend() may have set more).
      const keep = Math.ceil((this.lease.trustedUntil - monotonicNow() + 2) / (1 - this.lease.driftFactor)) + 1;
      await this.lease.extend(Math.min(2 ** 31 - 1, Math.max(newTtl, keep)), newDelay);
      this.ttl = Math.max(this.ttl, newTtl);
      this.lockDelayMs = Math.max(this.lockDelayMs, newDelay);
      this.lease.assertHeld();
      this.raiseLocally(policy);
    })();
  }

  /** The raises that need no round trip: the watchdog and lockAtLeastFor. */
  private raiseLocally(policy: LeasePolicy): void {
    const renewFor = policy.watchdog?.maxHold;
    if (renewFor === undefined) return void this.atLeast.raise(policy.lockAtLeastFor);
    if (this.watchdog) this.watchdog.raise(renewFor);
    else this.watchdog = this.makeWatchdog(renewFor, monotonicNow());
    this.atLeast.raise(policy.lockAtLeastFor);
  }

  private makeWatchdog(maxHold: number, from: number): LeaseWatchdog {
    const lease = this.lease;
    const settings = this;
    return new LeaseWatchdog(
      {
        get held() {
          return lease.held;
        },
        get ttlMs() {
          return settings.ttl;
        },
        get trustedUntil() {
          return lease.trustedUntil;
        },
        driftFactor: lease.driftFactor,
        extend: (ttl) => lease.extend(ttl, this.lockDelayMs),
        renewed: () => lease.renewed(),
        renewalFailed: (error) => lease.renewalFailed(error),
      },
      maxHold,
      from,
    );
  }
}
