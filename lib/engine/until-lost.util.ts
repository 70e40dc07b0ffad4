import type { Lease } from './lease.js';
import { unlessAborted } from './signals.util.js';

/**
 * Settle with `work`, or reject with the lease's `LeaseLostError` as soon as its signal aborts
 * (hard cancel). The work itself goes on until it notices the signal; its later outcome is dropped.
 */
export function untilLost<T>(lease: Lease, work: T | Promise<T>): Promise<T> {
  return unlessAborted(Promise.resolve(work), lease.signal, () => undefined);
}
