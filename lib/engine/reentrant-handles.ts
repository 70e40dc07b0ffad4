import type { LeaseLostError } from '../errors/lease-lost.error.js';

/**
 * The reentrant handles open on one lease. While any is open the key stays held even if the
 * owner releases first (a listener or detached task the owner started may still be running under
 * it); the last one to close gives the key back then. They share one signal, made on first use,
 * that aborts when the lease ends, however it ends — a released outer lease means the key may
 * have a new holder.
 */
export class ReentrantHandles {
  private controller?: AbortController;
  private open = 0;
  /** The owner released while handles were open: give the key back when the last one closes. */
  private releaseDeferred = false;

  constructor(
    /** Why the handles end, once the lease has ended (undefined while it is held). */
    private readonly endReason: () => LeaseLostError | undefined,
    /** The owner's release, deferred until the last handle closed. */
    private readonly release: () => void,
  ) {}

  get anyOpen(): boolean {
    return this.open > 0;
  }

  /** The handles' signal. */
  signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      const reason = this.endReason();
      if (reason) this.controller.abort(reason);
    }
    return this.controller.signal;
  }

  /** A handle opens: its signal. */
  opened(): AbortSignal {
    this.open += 1;
    return this.signal();
  }

  closed(): void {
    if (this.open > 0) this.open -= 1;
    if (this.open === 0 && this.releaseDeferred) {
      this.releaseDeferred = false;
      this.release();
    }
  }

  /** The owner released while handles are open. */
  deferRelease(): void {
    this.releaseDeferred = true;
  }

  /** The lease ended: every handle's signal aborts. */
  end(): void {
    // The reason is made only when a handle's signal exists (most leases never re-enter): a
    // LeaseLostError captures a stack trace, which cost more than the rest of a release.
    if (this.controller && !this.controller.signal.aborted) this.controller.abort(this.endReason());
  }

}
