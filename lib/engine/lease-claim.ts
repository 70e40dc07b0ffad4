import { DeadlineTimer } from '../common/deadline-timer.js';
import { monotonicNow } from '../common/validity.util.js';

/** The share of what is left of a provisional grant's validity that passes before its claim goes out. */
const CLAIM_AFTER = 0.1;

/**
 * A hand-off's claim not sent yet (see `AcquireResult.provisional.claim`): it goes out once a tenth
 * of what was left of the provisional validity at the grant has passed, or at once before an
 * extend; a release before that means it never goes — a short hold pays no round trip, and the
 * claim still has nine tenths of the provisional validity to land in.
 */
export class LeaseClaim {
  private claim?: () => Promise<number | undefined>;
  private readonly timer = new DeadlineTimer(() => this.now());

  constructor(
    claim: () => Promise<number | undefined>,
    /** Monotonic time the provisional validity ends. */
    until: number,
    private readonly confirm: (confirmed: Promise<number | undefined>) => void,
  ) {
    this.claim = claim;
    const now = monotonicNow();
    this.timer.set(now + Math.max(0, until - now) * CLAIM_AFTER);
  }

  /** Send the claim now, if it has not gone out yet. */
  now(): void {
    const claim = this.claim;
    if (!claim) return;
    this.claim = undefined;
    this.timer.clear();
    this.confirm(claim());
  }

  /** The lease ended first: the claim never goes out. */
  cancel(): void {
    this.claim = undefined;
    this.timer.clear();
  }
}
