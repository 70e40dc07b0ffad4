/**
 * Acquire attempts still unanswered, calls waiting in a queue, and the give-backs of grants that
 * came during shutdown: the backends close only once they have settled (each is bounded by its
 * backend's timeouts), or a grant answered after `close()` would hold its key for the whole ttl.
 */
export class InFlight {
  private readonly pending = new Set<Promise<unknown>>();

  /** How many are in flight. */
  get size(): number {
    return this.pending.size;
  }

  /** `promise`, remembered until it settles. */
  track<T>(promise: Promise<T>): Promise<T> {
    this.pending.add(promise);
    const forget = (): void => void this.pending.delete(promise);
    promise.then(forget, forget);
    return promise;
  }

  /** Work to wait for until the returned function is called (a call waiting in a queue). */
  open(): () => void {
    let done!: () => void;
    void this.track(new Promise<void>((resolve) => (done = resolve)));
    return done;
  }

  /** Wait for what is in flight, and for what its answers start, in up to `passes` rounds. */
  async settle(passes = 3): Promise<void> {
    for (let pass = 0; pass < passes && this.pending.size > 0; pass++) await Promise.allSettled([...this.pending]);
  }
}
