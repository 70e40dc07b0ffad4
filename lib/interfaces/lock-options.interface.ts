import type { LockPurpose } from './distributed-lock-options.interface.js';

/**
 * How a lease holds its key. `'write'` (the default) is the plain lock: it holds the key alone.
 * `'read'` holds it beside other readers (never beside a writer). `'upgradeable'` is a read that
 * can become the write lease without letting go of the key (`lease.upgrade()`): it holds beside
 * readers, one upgradeable at a time. Waiters are served in arrival order across modes: a reader
 * that comes while a writer waits queues behind it, so readers never starve a writer.
 */
export type LockMode = 'read' | 'write' | 'upgradeable';

/** How a lease lives once granted: renewal, scheduler semantics, lock-delay. */
export interface LeaseLifetimeOptions {
  /**
   * Renew the lease automatically (every ttl/3, owner-checked) while it is held, up to `maxHold`.
   * A failed or late renewal aborts `lease.signal`; a lost lease is never revived.
   * @default module `defaults.watchdog` (false)
   */
  watchdog?: boolean;
  /** Cap on the total hold time when the watchdog is on, ms. Required with the watchdog. */
  maxHold?: number;
  /**
   * Keep the lock at least this long after acquiring it, even if released sooner (ShedLock's
   * lockAtLeastFor): another replica with a skewed clock cannot rerun the same scheduled tick.
   * At most `ttl` (the ttl is the lockAtMostFor). @default 0
   */
  lockAtLeastFor?: number;
  /**
   * After the lease is lost without a release (expired, holder crashed), keep the key unavailable
   * to others this much longer (Chubby's lock-delay). @default module `defaults.lockDelay` (0)
   */
  lockDelay?: number;
}

/** Options of one acquisition through `DistributedLockService`. */
export interface LockOptions extends LeaseLifetimeOptions {
  /** What the lock protects; decides the backend. Required. */
  purpose: LockPurpose;
  /** Lease time to live in milliseconds. @default module `defaults.ttl` (30000) */
  ttl?: number;
  /**
   * How long to wait for a busy lock, in milliseconds; 0 = do not wait.
   * @default module `defaults.wait` (10000) for `acquire`/`using`; always 0 for `tryAcquire`
   */
  wait?: number;
  /** Cancels waiting; the acquisition then rejects with this signal's reason. */
  signal?: AbortSignal;
  /** Use this backend instead of the one the purpose routes to. */
  backend?: string;
  /**
   * A semaphore: at most this many holders of the key at once, each with its own lease, signal
   * and (fencing backends) token. Every caller of one key must pass the same number (a mismatch
   * rejects with `InvalidLockOptionsError`). An integer from 1 to 10,000. @default 1 (a lock)
   */
  permits?: number;
  /**
   * A read-write lock: `'read'` shares the key with other readers, `'write'` holds it alone,
   * `'upgradeable'` shares it with readers (one at a time) until `lease.upgrade()` makes it the
   * write lease. Only on a backend that serves read-write locks (`capabilities.readWrite`; a call
   * or decorator asking another fails naming `mode`); not with `permits` > 1. @default 'write' (the plain lock)
   */
  mode?: LockMode;
  /**
   * `using()` only: reject with `LeaseLostError` as soon as the lease's signal aborts, without
   * waiting for `fn` (which should stop cooperatively via `lease.signal`). @default false
   */
  rejectOnLoss?: boolean;
}

/** Options of `DistributedLockService.campaign()`: a leader's lease. */
export interface CampaignOptions {
  /** What leadership protects; decides the backend (`correctness`: a token per term). Required. */
  purpose: LockPurpose;
  /**
   * The leader's lease time to live, ms: renewed every ttl/3 while its process runs, so a paused
   * or dead leader is replaced this long after its last renewal (etcd, ZooKeeper: or when its
   * session ends, if sooner). @default module `defaults.ttl` (30000)
   */
  ttl?: number;
  /** Use this backend instead of the one the purpose routes to. */
  backend?: string;
  /**
   * Aborting it stops the campaign: a candidate still waiting rejects with the signal's reason;
   * a leader steps down (its lease is released, the next candidate leads).
   */
  signal?: AbortSignal;
  /** After a leader is lost without stepping down, keep the name unavailable this much longer, ms. @default module `defaults.lockDelay` */
  lockDelay?: number;
}
