import type { LockPurpose } from './distributed-lock-options.interface.js';

/**
 * Which backend a key is looked up on (`inspect`, `forceRelease`): the one a purpose routes to, or
 * one named (with a purpose too, the backend must be able to serve it).
 */
export type LockTarget = { purpose: LockPurpose; backend?: string } | { backend: string; purpose?: LockPurpose };

/** A held key, as `DistributedLockService.inspect()` and `list()` report it. */
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
   * How long the holder has held it, ms — when that is known: a holder in this process, or a
   * backend that keeps the grant's time (memory/testing). Redis, etcd, PostgreSQL and ZooKeeper keep
   * no grant time on the server, so another process's hold is reported without it.
   */
  readonly heldForMs?: number;
  /** The purpose its holder asked for — when the holder is in this process. */
  readonly purpose?: LockPurpose;
  /** true: the holder is a lease of this process. */
  readonly local?: boolean;
  /**
   * A semaphore key: the permits its holders agreed on, and how many hold one now. `remainingMs`
   * and `token` are then those of the holder whose hold ends last.
   */
  readonly permits?: number;
  readonly holders?: number;
  /**
   * A key held by a read-write lock's readers (`'read'`: `readers` of them, an upgradeable read
   * among them counted; `remainingMs` and `token` those of the reader whose hold ends last) or by a
   * writer (`'write'`). Absent on a plain lock's key of a backend that keeps no modes, and on
   * semaphores.
   */
  readonly mode?: 'read' | 'write';
  readonly readers?: number;
}

/** What `list()` takes besides its target: a key prefix and how many to report. */
export interface ListOptions {
  /** Only keys starting with it (the key as you name it, not the backend's stored name). @default '' (all) */
  prefix?: string;
  /** At most this many, newest first: an integer from 1 to 10,000. @default 100 */
  limit?: number;
}
