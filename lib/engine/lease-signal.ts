import type { LeaseLostError } from '../errors/lease-lost.error.js';

/** A lease's end as its holder sees it: the reason it was lost, and the signal that aborts with it. */
export class LeaseSignal {
  /** Why the lease was lost (its signal's reason), once it is. */
  error?: LeaseLostError;
  /**
   * Made on first read of the signal (most leases are never asked: an AbortController costs more
   * than the rest of a grant). Made after a loss, it is aborted already, with the same reason.
   */
  private made?: AbortController;

  get controller(): AbortController {
    if (!this.made) {
      this.made = new AbortController();
      if (this.error) this.made.abort(this.error);
    }
    return this.made;
  }

  /** Lost, with `error` as the reason (the first loss only: the caller checks). */
  abort(error: LeaseLostError): void {
    this.error = error;
    this.made?.abort(error);
  }
}
