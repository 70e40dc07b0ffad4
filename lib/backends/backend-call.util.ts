import { errorText } from '../common/redact.util.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';

/** Reject with `onTimeout()` if `promise` has not settled within `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Builds the error of one call: `Lock backend "<backend>" is unavailable (<operation> of "<key>"): <detail>`. */
export type Unavailable = (detail: string, cause?: unknown) => LockBackendUnavailableError;

export interface BoundedCall<T> {
  readonly backend: string;
  readonly operation: string;
  readonly key?: string;
  /** The backend is closed: fail at once, send nothing. */
  readonly closed: boolean;
  /** Wait for a connection first; bounded by its own timeout, rejecting with an `unavailable(…)`. */
  readonly connected?: (unavailable: Unavailable) => Promise<void>;
  readonly send: (unavailable: Unavailable) => Promise<T>;
  readonly timeoutMs: number;
  /** The detail of the error when no answer came within `timeoutMs` (read when it fires). */
  readonly timedOut: () => string;
  /**
   * Clean-up after a failure. The outcome of a request whose answer never came is unknown: it may
   * still be applied later (clients resend after reconnecting).
   */
  readonly onFailure?: (error: unknown) => void;
}

/**
 * One backend request that cannot hang: a closed backend fails at once, the connection wait and
 * the answer are bounded, and every failure reaches the caller as `LockBackendUnavailableError`
 * (with the client's own error as `cause`, its message stripped of credentials).
 */
export async function boundedCall<T>(call: BoundedCall<T>): Promise<T> {
  const unavailable: Unavailable = (detail, cause) =>
    new LockBackendUnavailableError(call.backend, call.operation, detail, { key: call.key, cause });
  if (call.closed) throw unavailable('the backend is closed (application shutting down)');
  await call.connected?.(unavailable);
  try {
    return await withTimeout(call.send(unavailable), call.timeoutMs, () => unavailable(call.timedOut()));
  } catch (error) {
    call.onFailure?.(error);
    if (error instanceof LockBackendUnavailableError) throw error;
    throw unavailable(errorText(error), error);
  }
}
