import { monotonicNow } from './validity.util.js';

/**
 * One unref'd timer that calls `fire` when the monotonic clock reaches a deadline; setting the
 * deadline again moves it. A lease's expiry and an etcd session's validity both end this way.
 */
export class DeadlineTimer {
  private timer?: NodeJS.Timeout;

  constructor(private readonly fire: () => void) {}

  /** Fire at monotonic time `at` — synchronously, now, when it has already passed. */
  set(at: number): void {
    this.clear();
    const remaining = at - monotonicNow();
    if (remaining <= 0) {
      this.fire();
      return;
    }
    this.timer = setTimeout(this.fire, Math.ceil(remaining));
    this.timer.unref();
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
