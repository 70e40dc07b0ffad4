/**
 * Keys seen busy in the last second, at most 1,000 (the oldest dropped first): a key busy a
 * moment ago is likely busy again, so a backend can skip the attempt that assumes a free key.
 */
export class BusyKeys {
  private readonly busyAt = new Map<string, number>();

  /** Remember that `key` was busy just now. */
  busy(key: string): void {
    this.busyAt.delete(key);
    this.busyAt.set(key, performance.now());
    if (this.busyAt.size > 1_000) this.busyAt.delete(this.busyAt.keys().next().value!);
  }

  /** Forget that `key` was busy: it was found free (and nobody waited for it) since. */
  free(key: string): void {
    this.busyAt.delete(key);
  }

  /** The keys remembered (see LockBackend.bookkeeping). */
  keys(): string[] {
    return [...this.busyAt.keys()];
  }

  recentlyBusy(key: string): boolean {
    const at = this.busyAt.get(key);
    return at !== undefined && performance.now() - at < 1_000;
  }
}
