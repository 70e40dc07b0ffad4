import type { Lease } from './lease.js';

/**
 * Settle with `work`, or reject with the lease's `LeaseLostError` as soon as its signal aborts
 * (hard cancel). The work itself goes on until it notices the signal; its later outcome is dropped.
 */
export function untilLost<T>(lease: Lease, work: T | Promise<T>): Promise<T> {
  const signal = lease.signal;
  if (signal.aborted) {
    void Promise.resolve(work).catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    Promise.resolve(work).then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
