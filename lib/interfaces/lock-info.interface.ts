import type { LockPurpose } from './distributed-lock-options.interface.js';

/**
 * Which backend a key is looked up on (`inspect`, `forceRelease`): the one a purpose routes to, or
 * one named (with a purpose too, the backend must be able to serve it).
 */
export type LockTarget = { purpose: LockPurpose; backend?: string } | { backend: string; purpose?: LockPurpose };

/** A held key, as `DistributedLockService.inspect()` reports it. */
export interface LockInfo {
  readonly key: string;
  /** The backend that holds it. */
  readonly backend: string;
  /** How long the backend keeps the holder's key if nothing renews or releases it, ms. */
  readonly remainingMs: number;
  /** Callers queued for the key (0 on Redlock, whose waiters retry instead of queueing). */
  readonly waiters: number;
  /** The holder's fencing token (fencing backends only). */
  readonly token?: bigint;
  /**
   * A semaphore key: the permits its holders agreed on, and how many hold one now. `remainingMs`
   * and `token` are then those of the holder whose hold ends last.
   */
  readonly permits?: number;
  readonly holders?: number;
}
