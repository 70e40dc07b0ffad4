/** What a backend can promise. The engine routes and refuses by these, never by backend name. */
export interface LockBackendCapabilities {
  /** Issues a fencing token that strictly increases across successive holders. */
  readonly fencing: boolean;
  /** Waiters are served in arrival order (no starvation on a hot key). */
  readonly fairQueue: boolean;
  /** Shared between processes and machines (false for the in-memory backend). */
  readonly distributed: boolean;
  /**
   * Serves semaphores: an `acquire` whose request has `permits` ≥ 2, and the calls on that hold
   * with `hold.permits` (see `HoldKind`). Absent: false, and the engine never sends `permits`.
   */
  readonly semaphore?: boolean;
  /**
   * Serves read-write locks: an `acquire` whose request has `mode` (`'read'`, `'upgradeable'`),
   * the calls on that hold with `hold.mode`, and `upgrade()`. A plain acquisition is the write
   * mode: it excludes readers, and readers and writers of one key wait in one line, in arrival
   * order. Absent: false, and the engine never sends a `mode`.
   */
  readonly readWrite?: boolean;
}

/**
 * What kind of hold a call on a key is about, as the acquisition asked for it: `permits` ≥ 2 is a
 * semaphore of that many holders; absent (or 1) a plain lock. `waitForTurn`, `extend` and `release`
 * get the same kind as the acquisition of that owner. A backend without `capabilities.semaphore`
 * is only ever called for plain locks.
 */
export interface HoldKind {
  readonly permits?: number;
  /**
   * A read-write lock's reader (`'read'`, `'upgradeable'`), or `'upgrade'`: the `waitForTurn` of
   * an upgradeable holder waiting in `upgrade()` for the readers to leave. Absent: a plain lock (a
   * writer, and an upgradeable read once upgraded). Only when `capabilities.readWrite`.
   */
  readonly mode?: ReadMode | 'upgrade';
}

/** The modes of a read-write lock's reader, as a backend sees them (the write mode is the plain lock). */
export type ReadMode = 'read' | 'upgradeable';

/** `upgrade()`'s answer. */
export type UpgradeResult =
  | { readonly upgraded: true; readonly token?: bigint }
  /** `held`: false when the owner no longer holds the key (expired, force-released): nothing is left to upgrade. */
  | { readonly upgraded: false; readonly held: boolean };

export interface AcquireRequest {
  /** The user's key, without any backend prefix. */
  readonly key: string;
  /** A fresh random id for this one acquisition: the only proof of ownership. */
  readonly owner: string;
  readonly ttlMs: number;
  /**
   * How long the engine will trust the grant (the ttl without the lock-delay the server keeps the
   * key for on top). A backend that judges a grant's remaining life (a Redis hand-off) uses this,
   * not `ttlMs`. Defaults to `ttlMs`.
   */
  readonly validityMs?: number;
  /**
   * true: if busy, join (or stay in) the key's wait queue so a release can hand the lock over.
   * false: a single try that leaves no trace when busy.
   */
  readonly queue: boolean;
  /** When busy and not queueing, say how long the holder's lease has left (may cost a round trip). */
  readonly reportHolder?: boolean;
  /**
   * A semaphore of this many holders (≥ 2; only when `capabilities.semaphore`): at most `permits`
   * owners hold the key at once, each with its own expiry and (fencing backends) its own token,
   * larger than any token granted on the key before; waiters are served in arrival order, woken
   * without polling. An acquisition that finds the key held or queued with another `permits` (a
   * plain lock counts as 1) rejects with `InvalidLockOptionsError` (field `permits`), and so does a
   * plain acquisition that finds a semaphore on the key (it may find out only when the key is
   * busy). Absent or 1: a plain lock.
   */
  readonly permits?: number;
  /**
   * A read-write lock's reader (only when `capabilities.readWrite`): `'read'` holds beside other
   * readers and an upgradeable read; `'upgradeable'` beside readers, at most one at a time. Either
   * is granted only when no writer holds the key and nobody waits ahead of it (a reader that comes
   * while a writer waits queues behind it); every reader its own expiry and (fencing backends) its
   * own token, larger than any granted on the key before. Absent: a writer (the plain lock), which
   * waits for every reader to leave. With `permits` ≥ 2 never.
   */
  readonly mode?: ReadMode;
}

export type AcquireResult =
  | {
      readonly acquired: true;
      readonly token?: bigint;
      /**
       * A grant the backend learned of without a request of its own (a hand-off message): the
       * lease is valid for `validForMs` from `validFrom` (a `performance.now()` time known to be
       * no later than the grant on the server), until `confirmed` resolves with the send time of
       * the request that set the full ttl. `confirmed` resolves `undefined` if the key turned out
       * not to be ours (the lease is then lost). Without `confirmed`, that validity is final (the
       * hand-off itself set the ttl on the server).
       */
      readonly provisional?: { readonly validFrom: number; readonly validForMs: number; readonly confirmed?: Promise<number | undefined> };
    }
  | {
      readonly acquired: false;
      /** Milliseconds until the holder's lease ends, when the backend knows it. */
      readonly holderRemainingMs?: number;
    };

/**
 * Told when the backend learns that `owner`'s lease is gone (for example its etcd session lease,
 * or an operator's `forceRelease()`). `reason` defaults to `'session-lost'`.
 */
export type LockLossListener = (owner: string, detail: string, reason?: 'expired' | 'not-owner' | 'session-lost' | 'force-released') => void;

/** A key's hold as its backend sees it (`inspect()`): what is left of it, who waits, its token. */
export interface HeldLock {
  /** How long the server keeps the holder's key if nothing renews or releases it, ms. */
  readonly remainingMs: number;
  /** Callers queued for the key (0 on a backend whose waiters poll). */
  readonly waiters: number;
  /** The holder's fencing token (fencing backends that keep it on the server). */
  readonly token?: bigint;
  /** How long the current holder has held it, ms, when the server knows (memory); else the engine adds it for a holder in its process. */
  readonly heldForMs?: number;
  /** The holder's owner id, when the backend reports it: the engine adds what it knows of a holder in its process (its token when the server keeps none, how long it has held). */
  readonly owner?: string;
  /**
   * A semaphore key: how many permits its holders agreed on, and how many hold one now. The other
   * fields then describe the holder whose hold ends last (its remaining time, its token).
   */
  readonly permits?: number;
  readonly holders?: number;
  /**
   * A backend with read-write locks: `'read'` when readers hold the key (`readers` of them, an
   * upgradeable one counted; the other fields then describe the reader whose hold ends last),
   * `'write'` when a writer does.
   */
  readonly mode?: 'read' | 'write';
  readonly readers?: number;
}

/**
 * A lock backend supplies only the primitive operations on one server technology. Ownership
 * checks happen on the server (compare-and-act); validity, signals, waiting policy and
 * reentrancy live in the engine. Backends know nothing of Nest.
 */
export interface LockBackend {
  /** The name options and errors use for this backend (`redis`, `etcd`, `memory`, …). */
  readonly name: string;
  readonly capabilities: LockBackendCapabilities;

  /** One attempt. Must not hang: reject with `LockBackendUnavailableError` on timeout. */
  acquire(request: AcquireRequest): Promise<AcquireResult>;

  /**
   * Resolve when another attempt by a queued `owner` is worth making: the lock was handed to it,
   * or `timeoutMs` passed (the fallback for holders that died without releasing).
   * Rejects with the signal's reason if `signal` aborts.
   */
  waitForTurn(key: string, owner: string, timeoutMs: number, signal?: AbortSignal, hold?: HoldKind): Promise<void>;

  /**
   * Keep `owner`'s key for `ttlMs` from now if `owner` still holds it; false: it does not. The
   * engine lengthens a lease with it (the watchdog, a reentrant raise) and shortens one (a lease
   * released with `lockAtLeastFor` left: extend to what is left, then `release()` when it has
   * passed — the engine's own timer, owner-checked).
   *
   * The promise is "at least `ttlMs` while the process lives". A backend with a per-key expiry
   * (Redis `PEXPIRE`) also ends the key at `ttlMs` if the process dies. One whose keys ride a
   * shared session lease (etcd) cannot set it: its key lives while the session does, so it ends
   * when the engine ends it (expiry, the delayed release above) or, if the process stops, at most
   * the session ttl after the last keep-alive (at once when `close()` revokes the session). Such a
   * backend says how long the session vouches for the key through `validUntil()`, and the engine
   * trusts a lease until the earlier of that and `ttlMs`.
   */
  extend(key: string, owner: string, ttlMs: number, hold?: HoldKind): Promise<boolean>;

  /**
   * Give up the key if `owner` holds it, and leave the wait queue if it is queued (a waiter that
   * stops waiting calls this too). Never touches another owner's key. false: `owner` did not hold it.
   */
  release(key: string, owner: string, hold?: HoldKind): Promise<boolean>;

  /**
   * `owner`'s upgradeable read of `key` becomes its write hold, without the key ever being free:
   * granted when no other reader holds it — kept for `ttlMs` from now, with a new token (fencing
   * backends) larger than every token granted on the key before, so larger than every reader's.
   * Otherwise the owner's upgrade waits first in line, ahead of every waiter (readers that come
   * now queue behind it), and `waitForTurn(key, owner, …, { mode: 'upgrade' })` resolves when
   * another try is worth making. `release()` ends the hold and the waiting upgrade both. Only when
   * `capabilities.readWrite`; after the upgrade, calls on the hold carry no `mode` (a writer's).
   */
  upgrade?(key: string, owner: string, ttlMs: number): Promise<UpgradeResult>;

  /**
   * Optional: refuse a key this backend can never hold (PostgreSQL: a NUL), throwing
   * `InvalidLockOptionsError` (field `key`) — synchronous, no call sent. A multi-key acquisition
   * checks every key through it before taking any; `acquire` refuses such a key by itself too.
   */
  checkKey?(key: string): void;

  /**
   * Optional: take all of `keys` (sorted, distinct) in one step — `keys[i]` for `owners[i]` — or
   * none: one attempt that never queues and leaves nothing behind when any key is busy (a Redis
   * script, an etcd txn). One token for all of them (fencing backends). Without it, or when it
   * answers busy, a multi-key acquisition takes the keys one at a time in order through `acquire`;
   * either way each key is then extended and released by its own owner.
   */
  acquireAll?(keys: readonly string[], owners: readonly string[], ttlMs: number): Promise<AcquireResult>;

  /**
   * Who holds `key` now, as the server sees it; null when nobody does. Must not hang. A semaphore
   * key is reported with its `permits` and `holders`.
   */
  inspect?(key: string): Promise<HeldLock | null>;

  /**
   * Optional: the keys whose name starts with `prefix` ('' for all) that may be held now, as the
   * user named them — a cheap enumeration of names only (Redis `SCAN`, never `KEYS`; an etcd range
   * read of keys only; a table or child-list read), at most `max` names, in any order, each once.
   * Plain locks and semaphore keys alike; never the backend's own bookkeeping (queues, markers).
   * The engine inspects each name (`inspect()`) to report it, so a name whose hold ended
   * meanwhile is harmless. Must not hang. `list()` needs it (with `inspect`).
   */
  listKeys?(prefix: string, max: number): Promise<string[]>;

  /**
   * End the current hold on `key`, whoever holds it (an operator's act): the key is free for the
   * next waiter, whose token (fencing backends) is larger. Resolves with the owner whose hold
   * ended, or undefined when nobody held it. The holder's process is told through `onLeaseLost`
   * (reason `'force-released'`) as soon as the backend can reach it, else it learns at its next
   * renewal or its validity end. Never deletes a later holder's key. On a semaphore key every
   * current holder's hold ends (each is told); resolves with one of them.
   */
  forceRelease?(key: string): Promise<string | undefined>;

  /**
   * Check that the server answers (Redis `PING`, etcd status) within `timeoutMs`; reject otherwise.
   * Used by `DistributedLockHealthIndicator`. A backend without it is reported as not checked.
   */
  ping?(timeoutMs: number): Promise<void>;

  /**
   * Whether the backend's idle connections may keep the process alive. The engine passes `false`
   * until the application has bootstrapped (and `true` after): Nest runs no shutdown hook when
   * another provider's `onModuleInit` fails, so a client that held the process then would leave a
   * `bootstrap().catch(log)` process hanging instead of exiting. Calls in flight keep the process
   * alive through their own timers either way.
   */
  holdProcess?(hold: boolean): void;

  /** Close what the backend opened itself; a client the application passed in stays open. */
  close(): Promise<void>;

  /**
   * Backends whose leases can die behind the engine's back (a session lease) report it here so
   * the engine aborts the affected leases' signals at once. Returns a function that removes the
   * listener (the engine calls it when its application closes: a backend the application passes
   * in outlives it, and must not keep a closed engine reachable).
   */
  onLeaseLost?(listener: LockLossListener): (() => void) | void;

  /**
   * The monotonic time (`performance.now()`) until which the backend itself can vouch for
   * `owner`'s hold — for etcd, its session lease's validity (last answered keep-alive's send time
   * + the lease TTL, minus drift), which may end before the lock's own ttl when keep-alives stop
   * getting through. `undefined`: the backend has no bound of its own (or `owner` holds nothing).
   * The engine trusts a lease until the earlier of its own validity and this.
   */
  validUntil?(owner: string): number | undefined;

  /**
   * What this instance keeps in memory per owner or per key — waiters, holders, queue places,
   * sessions' holders, operations in flight — by record name, each with its entries (owner ids,
   * keys). Once every lease and wait through this instance has ended and its own clean-up has run
   * (seconds at most), every record is back to what it held when idle: anything left is a leak.
   * Records bounded per key rather than per owner (caches of recently busy keys, of lines) end
   * their name in `Cache`; they may stay, bounded by the keys in use. Records
   * that empty by themselves on a timer of the backend's (a retried clean-up) are left out.
   * For tests and diagnostics only (the conformance suite's `bookkeeping-drains` check, the
   * randomized simulation): never on a lock's path. Optional.
   */
  bookkeeping?(): Readonly<Record<string, readonly string[]>>;
}

/** Injection token of the map from backend name to `LockBackend`. */
export const LOCK_BACKENDS = Symbol('LOCK_BACKENDS');
