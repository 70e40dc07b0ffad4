import type { ZooKeeperOpResult, ZooKeeperTransactionLike } from './zookeeper-client.interface.js';

// The ZooKeeper client's callbacks as promises, and the backend's bounded call.

/**
 * The backend's bounded call: rejects with `LockBackendUnavailableError` on failure or time-out,
 * and at once when the backend is closed — unless `closing` (the clean-up of `close()` itself).
 */
export type BoundedSend = <T>(operation: string, key: string, send: () => Promise<T>, closing?: boolean) => Promise<T>;

export const promised = <T>(fn: (callback: (error: Error | null | undefined, value: T, extra?: any) => void) => void): Promise<[T, any]> =>
  new Promise((resolve, reject) => fn((error, value, extra) => (error ? reject(error) : resolve([value, extra]))));

/**
 * Commit a multi-op. Rejects with the first failed operation's error, carrying every operation's
 * result (`results`: which one failed).
 */
export const committed = (transaction: ZooKeeperTransactionLike): Promise<ZooKeeperOpResult[]> =>
  new Promise((resolve, reject) =>
    transaction.commit((error, results) => (error ? reject(Object.assign(error, { results })) : resolve(results ?? []))),
  );

/** The results a failed multi-op's error carries (or the one a `LockBackendUnavailableError` wraps). */
export function resultsOf(error: unknown): ZooKeeperOpResult[] | undefined {
  for (let e = error as { results?: ZooKeeperOpResult[]; cause?: unknown } | undefined, depth = 0; e && depth < 3; e = e.cause as typeof e, depth++) {
    if (Array.isArray(e.results)) return e.results;
  }
  return undefined;
}
