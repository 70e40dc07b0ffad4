import { monotonicNow } from '../common/validity.util.js';

/**
 * The work running under one lease — the bodies of `using()` and decorated calls, reentrant ones
 * included — until it settles. A shutdown keeps the key while any of it runs (bounded by validity).
 */
export class LeaseWork {
  private readonly running = new Set<Promise<unknown>>();

  /** Track `work` (the Promise of a body, or what settles when its wrapper lets go of the lease). */
  track(work: Promise<unknown>): void {
    if (this.running.has(work)) return;
    this.running.add(work);
    const done = (): void => void this.running.delete(work);
    work.then(done, done);
  }

  get active(): boolean {
    return this.running.size > 0;
  }

  /**
   * Wait until all of it has settled (true) — work started meanwhile included — or the monotonic
   * time `until` has come (false). The timer does not keep the process alive.
   */
  async settledBefore(until: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const ranOut = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), Math.max(0, Math.ceil(until - monotonicNow())));
      timer.unref();
    });
    try {
      while (this.running.size > 0) {
        const settled = await Promise.race([Promise.allSettled([...this.running]).then(() => true), ranOut]);
        if (!settled) return false;
      }
      return true;
    } finally {
      clearTimeout(timer);
    }
  }
}
