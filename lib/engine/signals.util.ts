/**
 * One signal that aborts when any input does (with that input's reason), and a `dispose()`
 * that detaches it — unlike `AbortSignal.any`, nothing stays attached to a long-lived input
 * (the service's shutdown signal) after the wait is over.
 */
export function linkSignals(inputs: ReadonlyArray<AbortSignal | undefined>): { signal: AbortSignal; dispose(): void } {
  const signals = inputs.filter((s): s is AbortSignal => s !== undefined);
  if (signals.length === 1) return { signal: signals[0], dispose: () => undefined };
  const linked = new AbortController();
  const already = signals.find((s) => s.aborted);
  if (already) {
    linked.abort(already.reason);
    return { signal: linked.signal, dispose: () => undefined };
  }
  const listeners = signals.map((s) => {
    const onAbort = (): void => linked.abort(s.reason);
    s.addEventListener('abort', onAbort, { once: true });
    return () => s.removeEventListener('abort', onAbort);
  });
  return { signal: linked.signal, dispose: () => listeners.forEach((remove) => remove()) };
}

/** Resolve after `ms`, or reject with the signal's reason as soon as it aborts. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Settle with `work`, or reject with the signal's reason as soon as it aborts. Work that settles
 * after the abort is handed to `afterAbort` (to undo it: a grant nobody will use).
 */
export function unlessAborted<T>(work: Promise<T>, signal: AbortSignal, afterAbort: () => void): Promise<T> {
  if (signal.aborted) {
    void work.then(afterAbort, afterAbort);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      void work.then(afterAbort, afterAbort);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
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
