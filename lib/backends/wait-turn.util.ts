/**
 * Wake-up bookkeeping shared by backends: a waiter owner may be woken before it starts waiting
 * (the wake travels on another connection than the reply), so a wake is remembered until used.
 */
export class TurnWaiters<Extra extends object = object> {
  /** Per tracked owner: its wake-up state, and whatever else a backend keeps per waiter (`Extra`). */
  protected readonly waiters = new Map<string, { woken: boolean; wake?: () => void } & Partial<Extra>>();

  /** Start tracking `owner` (before its queue entry can exist, so no wake is missed). */
  track(owner: string): void {
    if (!this.waiters.has(owner)) this.waiters.set(owner, { woken: false } as { woken: boolean } & Partial<Extra>);
  }

  /** The owners tracked (see LockBackend.bookkeeping). */
  owners(): string[] {
    return [...this.waiters.keys()];
  }

  forget(owner: string): void {
    this.waiters.get(owner)?.wake?.();
    this.waiters.delete(owner);
  }

  wake(owner: string): void {
    const waiter = this.waiters.get(owner);
    if (!waiter) return;
    if (waiter.wake) waiter.wake();
    else waiter.woken = true;
  }

  /** Resolve on a wake, after `timeoutMs`, or reject with the signal's reason. */
  wait(owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    let waiter = this.waiters.get(owner);
    if (!waiter) {
      waiter = { woken: false } as { woken: boolean } & Partial<Extra>;
      this.waiters.set(owner, waiter);
    }
    if (waiter.woken) {
      waiter.woken = false;
      return Promise.resolve();
    }
    const entry = waiter;
    return new Promise<void>((resolve, reject) => {
      const settle = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (entry.wake === done) entry.wake = undefined;
      };
      const done = (): void => {
        settle();
        resolve();
      };
      const onAbort = (): void => {
        settle();
        reject(signal!.reason);
      };
      const timer = setTimeout(done, Math.max(0, timeoutMs));
      entry.wake = done;
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
