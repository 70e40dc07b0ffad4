import { DeadlineTimer } from '../common/deadline-timer.js';
import { monotonicNow } from '../common/validity.util.js';

/**
 * A lease's expiry. Due while a request that may lengthen the lease is in flight (a hand-off's
 * claim, an extend, a renewal), it looks once more after this turn's I/O (one `setImmediate`)
 * before calling the lease expired: a holder whose event loop was busy past its validity (CPU-bound
 * work right after a grant, a long GC pause) finds the timer and the answer due together, and
 * timers run before I/O — the answer, already read off the socket, would come second. A request
 * not answered by then keeps nothing.
 */
export class LeaseExpiry extends DeadlineTimer {
  private at = 0;
  private lengthening = 0;
  private rechecking = false;

  constructor(private readonly expire: () => void) {
    let self: LeaseExpiry | undefined;
    super(() => self?.due());
    self = this;
  }

  override set(at: number): void {
    this.at = at;
    super.set(at);
  }

  /** `request` may lengthen the lease: counted until it settles. */
  lengthen<T>(request: Promise<T>): Promise<T> {
    this.lengthening += 1;
    const settled = (): void => void (this.lengthening -= 1);
    request.then(settled, settled);
    return request;
  }

  private due(): void {
    if (this.lengthening === 0) return this.expire();
    if (this.rechecking) return;
    this.rechecking = true;
    setImmediate(() => {
      this.rechecking = false;
      // Node's timers count whole ms: one may fire up to a ms before a fractional deadline. Not
      // due yet: armed again (else a lease whose request then fails would never expire).
      if (monotonicNow() >= this.at) this.expire();
      else super.set(this.at);
    });
  }
}
