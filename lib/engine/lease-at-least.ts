import type { LockBackend } from '../backends/lock-backend.interface.js';
import { monotonicNow } from '../common/validity.util.js';
import type { OrderedCalls } from './ordered-calls.js';

/**
 * `lockAtLeastFor`: a released key stays held until that long after the acquisition (a job that
 * ran in 10 ms must not run again on another replica's clock tick). A reentrant acquisition may
 * lengthen it, never shorten it.
 */
export class LockAtLeast {
  /** Monotonic time until which a release keeps the key. */
  private until: number;

  constructor(
    private forMs: number,
    acquiredAt: number,
  ) {
    this.until = acquiredAt + forMs;
  }

  /** Keep the key at least `forMs` from now, if that is longer than what it keeps now. */
  raise(forMs: number): void {
    if (forMs <= this.forMs) return;
    this.forMs = forMs;
    this.until = Math.max(this.until, monotonicNow() + forMs);
  }

  /** Whether a release now keeps the key a while (the at-least time is still ahead). */
  keeps(): boolean {
    return this.forMs > 0 && this.until - monotonicNow() > 0;
  }

  /**
   * Give the key back, owner-checked: at once, or — `keep`, and the at-least time still ahead —
   * shorten its life to exactly that time, then delete it. true if the key was still ours.
   */
  async giveBack(backend: LockBackend, key: string, owner: string, lease: { readonly calls: OrderedCalls }, keep: boolean): Promise<boolean> {
    if (!keep || this.until - monotonicNow() <= 0) return backend.release(key, owner);
    // The shortening goes after a claim or extend still unanswered, which would otherwise move
    // that end. (A plain release need not wait: a call landing after it finds the key not ours.)
    let keepMs = 1;
    const releaseLater = (): void => void setTimeout(() => void backend.release(key, owner).catch(() => undefined), keepMs).unref();
    let wasOwner: boolean;
    try {
      // (The lease's ordered calls are read only here: a plain release never makes them.)
      wasOwner = await lease.calls.send(() => {
        keepMs = Math.max(1, Math.ceil(this.until - monotonicNow()));
        return backend.extend(key, owner, keepMs);
      });
    } catch (error) {
      // Unknown whether the key was shortened: it is still deleted (owner-checked) once the
      // at-least time has passed, and a backend forgets the owner then — not only at its ttl.
      releaseLater();
      throw error;
    }
    if (wasOwner) releaseLater();
    return wasOwner;
  }
}
