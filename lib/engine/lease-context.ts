import { AsyncLocalStorage } from 'node:async_hooks';
import { LEASE_INTERNALS, type Lease } from './lease.js';

const isPromiseLike = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';

/** The leases of a context that holds none (one array, never written). */
const NO_LEASES: readonly Lease[] = Object.freeze([]);

/**
 * The leases held by the current async context — taken by `using()` and decorated calls, innermost
 * last. Reentrancy, `current()` and the fences read it; a lease is entered only while work runs.
 */
export class LeaseContext {
  private readonly storage = new AsyncLocalStorage<readonly Lease[]>();

  /** Every lease of this async context, outermost first. */
  leases(): readonly Lease[] {
    return this.storage.getStore() ?? NO_LEASES;
  }

  /** The innermost lease of this context, or the innermost one on `key`. */
  current(key?: string): Lease | undefined {
    const leases = this.storage.getStore();
    if (!leases) return undefined;
    for (let i = leases.length - 1; i >= 0; i--) {
      if (key === undefined || leases[i].key === key) return leases[i];
    }
    return undefined;
  }

  /** The innermost lease still held on `key` (one of its keys) at `backend`: a nested acquisition re-enters it. */
  reentrant(key: string, backend: string): Lease | undefined {
    return this.storage.getStore()?.findLast((lease) => lease.backend === backend && LEASE_INTERNALS.held(lease) && (lease.key === key || lease.keys.includes(key)));
  }

  /** The innermost lease still held at `backend` that covers every one of `keys`. */
  covering(keys: readonly string[], backend: string): Lease | undefined {
    return this.storage.getStore()?.findLast((lease) => lease.backend === backend && LEASE_INTERNALS.held(lease) && keys.every((key) => lease.keys.includes(key)));
  }

  /** Throw the loss of `lease`, or of any lease this context is nested in, if one is known lost. */
  assertHeldAround(lease: Lease): void {
    const lost = LEASE_INTERNALS.lostWith(lease) ?? this.leases().map((outer) => LEASE_INTERNALS.lostWith(outer)).find((lost) => lost !== undefined);
    if (lost) throw lost;
  }

  /**
   * Run `fn` with `lease` as the innermost lease of its async context (no release). The work now
   * running under the lease is tracked — a shutdown waits for it before it gives the key back:
   * until its Promise settles, or (an Observable, a plain value) until the handle is released.
   */
  run<T>(lease: Lease, fn: () => T): T {
    const outer = this.storage.getStore();
    const result = this.storage.run(outer ? [...outer, lease] : [lease], fn);
    LEASE_INTERNALS.core(lease).trackWork(isPromiseLike(result) ? Promise.resolve(result) : LEASE_INTERNALS.whenReleased(lease));
    return result;
  }
}
