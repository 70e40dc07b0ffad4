import { errorText } from '../common/redact.util.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { afterPendingIo, type AnswerDeadlines } from './answer-deadlines.js';

/** Reject with `onTimeout()` if `promise` has not settled within `ms` (see afterPendingIo). */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => afterPendingIo(() => settled || reject(onTimeout())), ms);
    promise.then(
      (value) => {
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        settled = true;
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
  /**
   * Wait for a connection first (undefined: connected, send at once); bounded by its own timeout,
   * rejecting with an `unavailable(…)`.
   */
  readonly connected?: (unavailable: Unavailable) => Promise<void> | undefined;
  readonly send: (unavailable: Unavailable) => Promise<T>;
  readonly timeoutMs: number;
  /** The backend's deadlines for answers within `timeoutMs` (one timer for all its calls). */
  readonly deadlines?: AnswerDeadlines;
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
export function boundedCall<T>(call: BoundedCall<T>): Promise<T> {
  const unavailable: Unavailable = (detail, cause) =>
    new LockBackendUnavailableError(call.backend, call.operation, detail, { key: call.key, cause });
  if (call.closed) return Promise.reject(unavailable('the backend is closed (application shutting down)'));
  const connecting = call.connected?.(unavailable);
  return connecting ? connecting.then(() => sendBounded(call, unavailable)) : sendBounded(call, unavailable);
}

function sendBounded<T>(call: BoundedCall<T>, unavailable: Unavailable): Promise<T> {
  const failed = (error: unknown): unknown => {
    call.onFailure?.(error);
    return error instanceof LockBackendUnavailableError ? error : unavailable(errorText(error), error);
  };
  let answer: Promise<T>;
  try {
    answer = call.send(unavailable);
  } catch (error) {
    answer = Promise.reject(error);
  }
  const timedOut = (): Error => unavailable(call.timedOut());
  if (call.deadlines && call.deadlines.ms === call.timeoutMs) return call.deadlines.bound(answer, timedOut, failed);
  return withTimeout(answer, call.timeoutMs, timedOut).catch((error: unknown) => {
    throw failed(error);
  });
}
