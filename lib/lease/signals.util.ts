/**
 * One signal that aborts when either input does (with that input's reason), and a `dispose()`
 * that detaches it — unlike `AbortSignal.any`, nothing stays attached to a long-lived input
 * (the service's shutdown signal) after the wait is over.
 */
export function linkSignals(a: AbortSignal | undefined, b: AbortSignal): { signal: AbortSignal; dispose(): void } {
  if (!a) return { signal: b, dispose: () => undefined };
  const linked = new AbortController();
  const fromA = (): void => linked.abort(a.reason);
  const fromB = (): void => linked.abort(b.reason);
  if (a.aborted) fromA();
  else if (b.aborted) fromB();
  else {
    a.addEventListener('abort', fromA, { once: true });
    b.addEventListener('abort', fromB, { once: true });
  }
  return {
    signal: linked.signal,
    dispose: () => {
      a.removeEventListener('abort', fromA);
      b.removeEventListener('abort', fromB);
    },
  };
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
