import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { EtcdClientLike, EtcdWatcherLike } from './etcd-client.interface.js';
import type { AcquireRequest, AcquireResult, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { monotonicNow } from '../../common/validity.util.js';
import { ETCD_CAPABILITIES, ETCD_DEFAULTS } from './etcd-backend.options.js';
import { DEFAULT_DRIFT_FACTOR } from '../../common/checks.util.js';
import { boundedCall, withTimeout } from '../backend-call.util.js';
import { TurnWaiters } from '../wait-turn.util.js';
import { EtcdSession } from './etcd-session.js';

export interface EtcdBackendConfig {
  /** An `Etcd3` client. */
  client: EtcdClientLike;
  /** Close the client in `close()` (true only when the module created it). */
  ownsClient: boolean;
  /** Prefix of every key this backend writes. @default 'lock/' */
  prefix?: string;
  /** TTL of the shared session lease, in seconds (whole, ≥ 1). @default 10 */
  sessionTtlSeconds?: number;
  commandTimeoutMs?: number;
  driftFactor?: number;
  name?: string;
}

interface Queued {
  session: EtcdSession;
  key: string;
  /** Create revision of our queue key: our place in line. */
  rev: bigint;
  predecessor?: string;
  watcher?: EtcdWatcherLike;
}

/** Retry a clean-up this many ms after a write whose outcome is unknown (it may still land). */
const CLEANUP_DELAYS_MS = [0, 1_000, 3_000, 10_000];
/** Retry revoking a session we gave up (its keep-alives already stopped) this many ms later. */
const REVOKE_RETRY_DELAYS_MS = [1_000, 3_000, 10_000];
/**
 * The gRPC deadline outlives our own timeout by this much. A deadline that expires makes etcd3
 * (default fault handling) reset its channels and retry the call with the expired deadline —
 * three failures in a row, which open its circuit breaker: every call on the client then fails
 * with BrokenCircuitError for 5 s, healthy network or not. Our timeout already bounds the caller;
 * the deadline only has to stop a request that is truly stuck from being kept forever — and not
 * much later than that: a pending call keeps its connection, and so a closed application's
 * process, alive until its deadline (2.5 s: a late answer still arrives within it; a request
 * pending at close() ends within commandTimeoutMs + 2.5 s).
 */
const GRPC_DEADLINE_SLACK_MS = 2_500;
/** A UTF-16 surrogate not part of a pair (`!key.isWellFormed()`, which this TS lib target lacks). */
const LONE_SURROGATE = /\p{Cs}/u;
/** A queued waiter re-reads its place this often even without a watch event. */
const RECHECK_MS = 5_000;

/**
 * `correctness` locks on etcd, following etcd's concurrency recipe: every acquirer puts a key
 * `<prefix><key>/<owner>` on a shared session lease; the lowest create revision holds the lock;
 * each waiter watches only its predecessor's deletion (FIFO, no herd).
 *
 * The fencing token is the cluster revision at which the lock became ours: the revision of our
 * put when the key was free, else the revision of the read that found no predecessor left. It is
 * strictly greater than the previous holder's token (that holder's delete came between), and,
 * being etcd's raft-replicated revision, it never goes backwards across leader failover.
 *
 * A lock's own ttl: the session lease is shared, so the engine deletes the key itself when the
 * ttl runs out (and aborts the signal). If the process cannot (paused, crashed, partitioned), the
 * session lease expires on the server and takes the key with it: a lock outlives its ttl only by
 * at most the session ttl, and only when its holder is unhealthy.
 */
export class EtcdBackend implements LockBackend {
  readonly capabilities = ETCD_CAPABILITIES;
  readonly name: string;
  private readonly client: EtcdClientLike;
  private readonly prefix: string;
  private readonly sessionTtlSeconds: number;
  private readonly commandTimeoutMs: number;
  private readonly driftFactor: number;
  private readonly turns = new TurnWaiters();
  private readonly queued = new Map<string, Queued>();
  /** Owner → session, for every owner holding a lock. */
  private readonly holding = new Map<string, EtcdSession>();
  private readonly lossListeners: LockLossListener[] = [];
  /** Keys with clean-up deletes still scheduled (count per key). */
  private readonly cleaning = new Map<string, number>();
  private session?: EtcdSession;
  /** Every session not yet ended: the current one and retired ones still in use. */
  private readonly sessions = new Set<EtcdSession>();
  private creating?: Promise<EtcdSession>;
  private closed = false;
  private holdsProcess = true;

  private readonly ownsClient: boolean;

  constructor(config: EtcdBackendConfig) {
    this.client = config.client;
    this.ownsClient = config.ownsClient;
    this.name = config.name ?? 'etcd';
    this.prefix = config.prefix ?? ETCD_DEFAULTS.prefix;
    this.sessionTtlSeconds = config.sessionTtlSeconds ?? ETCD_DEFAULTS.sessionTtlSeconds;
    this.commandTimeoutMs = config.commandTimeoutMs ?? ETCD_DEFAULTS.commandTimeoutMs;
    this.driftFactor = config.driftFactor ?? DEFAULT_DRIFT_FACTOR;
  }

  onLeaseLost(listener: LockLossListener): () => void {
    this.lossListeners.push(listener);
    return () => {
      const index = this.lossListeners.indexOf(listener);
      if (index >= 0) this.lossListeners.splice(index, 1);
    };
  }

  /**
   * `<prefix><encoded key>/`: the encoding keeps `a` and `a/b` from sharing a range. A key with a
   * lone surrogate has no encoding (encodeURIComponent would throw a raw URIError): refused.
   */
  lockPrefix(key: string): string {
    if (LONE_SURROGATE.test(key)) {
      throw new InvalidLockOptionsError('key', 'it contains a lone UTF-16 surrogate (not well-formed Unicode)', `the ${this.name} backend`);
    }
    return `${this.prefix}${encodeURIComponent(key)}/`;
  }

  /**
   * Until when the session lease `owner`'s key rides on is known to live (monotonic): the lock
   * cannot be trusted past it whatever its own ttl, since etcd deletes the key with the lease.
   */
  validUntil(owner: string): number | undefined {
    const session = this.holding.get(owner);
    return session && !session.lost ? session.validUntilMs : undefined;
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const queued = this.queued.get(request.owner);
    if (queued && !queued.session.lost) {
      const result = await this.recheck(request, queued);
      if (result) return result;
    } else if (queued) {
      this.dropQueued(request.owner);
    }
    return this.enqueue(request);
  }

  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.turns.wait(owner, Math.min(timeoutMs, RECHECK_MS), signal);
  }

  /**
   * `ttlMs` is not sent: the key rides the shared session lease, which keep-alives renew, so it
   * lives while the session does (see `LockBackend.extend`). The engine ends it at `ttlMs` itself
   * — its expiry, or a lockAtLeastFor release's delayed delete — and trusts it no longer than
   * `validUntil(owner)`. So existing now, on a session not lost, is all an extend can check.
   */
  async extend(key: string, owner: string, _ttlMs?: number): Promise<boolean> {
    const session = this.holding.get(owner);
    if (!session || session.lost) return false;
    const myKey = Buffer.from(this.lockPrefix(key) + owner);
    const response = await this.call('extend', key, () => this.client.kv.range({ key: myKey, keys_only: true }, this.deadline()));
    return response.kvs.length === 1 && !session.lost;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const myKey = Buffer.from(this.lockPrefix(key) + owner);
    const waitedOn = this.queued.get(owner)?.session;
    this.dropQueued(owner);
    const session = this.holding.get(owner);
    this.holding.delete(owner);
    session?.holders.delete(owner);
    if (session) this.endIfDrained(session);
    // Before bootstrap, an idle session must not keep the process alive (its keep-alives would).
    if (!this.holdsProcess && (session ?? waitedOn)) this.retire((session ?? waitedOn)!);
    // If the delete's answer is lost (a leader election can hold a request for seconds), keep
    // trying in the background and retire the session: the healthy session would otherwise keep
    // the key alive.
    const response = await this.call(
      'release',
      key,
      () => this.client.kv.deleteRange({ key: myKey }, this.deadline()),
      myKey.toString(),
      session ?? waitedOn,
    );
    return Number(response.deleted) > 0 && session !== undefined;
  }

  /**
   * Before the application has bootstrapped (`false`), a session is revoked as soon as it is idle
   * (the next acquisition grants a new one): etcd3's keep-alive stream and timer of a lingering
   * session would keep a process whose bootstrap failed elsewhere from exiting.
   */
  holdProcess(hold: boolean): void {
    this.holdsProcess = hold;
    if (!hold && this.session) this.retire(this.session);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.session = undefined;
    for (const owner of [...this.queued.keys()]) this.dropQueued(owner);
    const sessions = [...this.sessions];
    this.sessions.clear();
    await Promise.all(
      sessions.map((session) => {
        session.end();
        return this.revoke(session, false);
      }),
    );
    if (this.ownsClient) {
      // etcd3's watch manager retries a broken watch stream on a ref'd timer with growing backoff,
      // and keeps doing so after close() (each retry fails on the closed pool and schedules the
      // next): a closed application's process would never exit. End that chain at its next tick.
      const watchManager = (this.client as unknown as { watchManager?: { establishStream?: () => void; stream?: { cancel?: () => void } } }).watchManager;
      if (watchManager && typeof watchManager.establishStream === 'function') watchManager.establishStream = () => undefined;
      // And end the watch stream itself: closing the client leaves calls in flight running, and a
      // watch is a call without a deadline — one watcher whose cancel never completed (it waits
      // for an answer of the server, or for a reconnect) kept the process alive for good.
      try {
        watchManager?.stream?.cancel?.();
      } catch {
        // already ended
      }
      this.client.close();
    }
  }

  /**
   * First attempt of an owner: one txn that takes the free key, or joins the queue when asked to.
   * If etcd says the session lease does not exist (revoked, or expired before its keep-alive
   * told us), the session is lost: its holders are told, and the attempt is made once more on a
   * new session instead of failing every acquire until the keep-alive notices.
   */
  private async enqueue(request: AcquireRequest, retried = false): Promise<AcquireResult> {
    const { key, owner, queue } = request;
    const prefix = this.lockPrefix(key);
    const myKey = prefix + owner;
    if (this.cleaning.has(myKey)) {
      // Its key is being deleted in the background: a grant on it could vanish under the holder.
      throw new LockBackendUnavailableError(this.name, 'acquire', 'an earlier write of this owner had an unknown outcome; retry with a new owner id', { key });
    }
    let session = await this.currentSession(key);
    // Retired (or lost) while we waited for it: no new key may go on it.
    for (let i = 0; i < 3 && (session.retired || session.lost); i++) session = await this.currentSession(key);
    if (session.retired || session.lost) {
      throw new LockBackendUnavailableError(this.name, 'acquire', 'every new session was retired at once (writes keep timing out)', { key });
    }
    const range = { key: Buffer.from(prefix), range_end: prefixEnd(prefix) };
    const put = { request_put: { key: Buffer.from(myKey), value: Buffer.alloc(0), lease: session.id } };
    const mine = { request_range: { key: Buffer.from(myKey), keys_only: true } };
    session.pending += 1;
    try {
      let response;
      try {
        response = await this.call(
          'acquire',
          key,
          () =>
            this.client.kv.txn(
              {
                // The range is empty: nobody holds or waits.
                compare: [{ ...range, target: 'Create', result: 'Equal', create_revision: 0 }],
                success: [put],
                // Busy. First: is the key ours already? etcd3 retries a request whose answer was
                // lost to a broken connection, so an earlier copy of this very txn may have
                // written it. Then, when queueing: queue behind the newest key (limit 2: our own
                // put may be among them).
                failure: queue
                  ? [mine, put, { request_range: { ...range, sort_order: 'Descend', sort_target: 'Create', limit: 2, keys_only: true } }]
                  : [mine],
              },
              this.deadline(),
            ),
          // Also for a single try (queue false): a put whose answer never came may still be
          // applied, and would then sit on our healthy session, blocking the key for good.
          myKey,
          session,
        );
      } catch (error) {
        if (!retried && isLeaseNotFound(error)) return await this.enqueue(request, true);
        throw error;
      } finally {
        session.pending -= 1;
      }
      const revision = BigInt(response.header.revision);
      if (session.lost) {
        this.scheduleCleanup(myKey);
        throw new LockBackendUnavailableError(this.name, 'acquire', 'the session lease was lost while acquiring', { key });
      }
      if (response.succeeded) return this.granted(owner, session, revision);
      // Our key from an earlier copy of this txn: its create revision is our place in line.
      const earlier: { create_revision: string } | undefined = response.responses[0].response_range.kvs[0];
      if (!queue) {
        // A single try writes only when the key was free: that earlier copy took the lock, then.
        return earlier ? this.granted(owner, session, BigInt(earlier.create_revision)) : { acquired: false };
      }
      const keys: string[] = response.responses[2].response_range.kvs.map((kv: { key: Buffer }) => kv.key.toString());
      const entry: Queued = { session, key: myKey, rev: earlier ? BigInt(earlier.create_revision) : revision };
      this.queued.set(owner, entry);
      session.waiters.add(owner);
      this.turns.track(owner);
      // With an earlier copy, the newest keys may be behind ours: let a re-check find our predecessor.
      this.watchPredecessor(owner, entry, earlier ? undefined : keys.find((k) => k !== myKey));
      return { acquired: false };
    } finally {
      this.endIfDrained(session);
    }
  }

  /**
   * A queued owner's next attempt: read-only (no raft write, no fsync). If no key older than ours
   * is left, the lock is ours at this read's revision. undefined: our key is gone, start over.
   */
  private async recheck({ key, owner }: AcquireRequest, entry: Queued): Promise<AcquireResult | undefined> {
    const prefix = this.lockPrefix(key);
    const response = await this.call('acquire', key, () =>
      this.client.kv.txn({
        compare: [{ key: Buffer.from(entry.key), target: 'Create', result: 'Equal', create_revision: entry.rev.toString() }],
        success: [
          {
            request_range: {
              key: Buffer.from(prefix),
              range_end: prefixEnd(prefix),
              sort_order: 'Descend',
              sort_target: 'Create',
              max_create_revision: (entry.rev - 1n).toString(),
              limit: 1,
              keys_only: true,
            },
          },
        ],
        failure: [],
      }, this.deadline()),
    );
    if (!response.succeeded || entry.session.lost) {
      this.dropQueued(owner);
      return undefined;
    }
    const predecessor: string | undefined = response.responses[0].response_range.kvs[0]?.key.toString();
    if (predecessor === undefined) {
      // Holder first, then out of the queue: the session is never seen unused in between.
      const result = this.granted(owner, entry.session, BigInt(response.header.revision));
      this.dropQueued(owner);
      return result;
    }
    if (predecessor !== entry.predecessor) this.watchPredecessor(owner, entry, predecessor);
    return { acquired: false };
  }

  private granted(owner: string, session: EtcdSession, token: bigint): AcquireResult {
    session.holders.add(owner);
    this.holding.set(owner, session);
    return { acquired: true, token };
  }

  /** Watch only the key just ahead of ours; its deletion is our cue (no thundering herd). */
  private watchPredecessor(owner: string, entry: Queued, predecessor: string | undefined): void {
    void entry.watcher?.cancel().catch(() => undefined);
    entry.watcher = undefined;
    entry.predecessor = predecessor;
    if (predecessor === undefined) {
      this.turns.wake(owner);
      return;
    }
    // Watch from "now", not from our enqueue's revision: a watch that starts in the past is an
    // *unsynced* watcher on the server, whose events wait for etcd's background sync loop (every
    // 100 ms) — on a hot key that alone cost ~6 ms per hand-off. A deletion between our enqueue
    // and the watch's start is covered instead by one re-check (a read) once the watch is
    // established, and again after any reconnect.
    const watcher = this.client.watch().key(predecessor).only('delete').watcher();
    watcher.on('delete', () => this.turns.wake(owner));
    watcher.on('connected', () => this.turns.wake(owner));
    watcher.on('error', () => undefined);
    entry.watcher = watcher;
  }

  private dropQueued(owner: string): void {
    const entry = this.queued.get(owner);
    this.turns.forget(owner);
    if (!entry) return;
    this.queued.delete(owner);
    entry.session.waiters.delete(owner);
    void entry.watcher?.cancel().catch(() => undefined);
    this.endIfDrained(entry.session);
  }

  private async currentSession(key: string): Promise<EtcdSession> {
    if (this.session && !this.session.lost) return this.session;
    this.creating ??= this.createSession(key).finally(() => (this.creating = undefined));
    return this.creating;
  }

  private async createSession(key: string): Promise<EtcdSession> {
    if (this.closed) throw new LockBackendUnavailableError(this.name, 'acquire', 'the backend is closed (application shutting down)', { key });
    const sentAt = monotonicNow();
    // Our own keep-alives (see EtcdSession), each bounded by a deadline.
    const lease = this.client.lease(this.sessionTtlSeconds, { autoKeepAlive: false, ...this.deadline() });
    const keepAlive = async (): Promise<number> => {
      // The gRPC deadline has the usual slack (a request cut at our own timeout counts against
      // etcd3's circuit breaker); we stop waiting at commandTimeoutMs either way.
      const response = await withTimeout(lease.keepaliveOnce(this.deadline()), this.commandTimeoutMs, () => new Error('keep-alive timed out'));
      return Number(response?.TTL ?? 0);
    };
    const session = new EtcdSession(lease, this.sessionTtlSeconds, this.driftFactor, sentAt, (s, detail) => this.loseSession(s, detail), keepAlive);
    try {
      const id = await this.call('grant', key, () => lease.grant());
      session.start(id);
    } catch (error) {
      session.end();
      lease.release();
      throw error;
    }
    if (session.lost) throw new LockBackendUnavailableError(this.name, 'grant', 'the new session lease was lost at once', { key });
    if (this.closed) {
      session.end();
      void this.revoke(session, false);
      throw new LockBackendUnavailableError(this.name, 'acquire', 'the backend is closed (application shutting down)', { key });
    }
    this.session = session;
    this.sessions.add(session);
    return session;
  }

  /**
   * A write on `session` had an unknown outcome: a key of ours may land on it at any time. Put no
   * new keys on it, and revoke it once nobody holds, waits or writes on it — the revoke takes any
   * late key with it (and a put arriving after the revoke fails: no such lease).
   */
  private retire(session: EtcdSession): void {
    if (session.lost || session.retired) return;
    session.retired = true;
    if (this.session === session) this.session = undefined;
    this.endIfDrained(session);
  }

  private endIfDrained(session: EtcdSession): void {
    if (!session.retired || session.lost || !session.idle) return;
    session.end();
    this.sessions.delete(session);
    void this.revoke(session, true);
  }

  /**
   * Revoke an ended session: its keys go at once. revoke() stops the keep-alives first, so if
   * etcd cannot be reached the lease still expires by its TTL; with `retry`, a failed revoke is
   * tried again a few times meanwhile (a late put on the lease may be all that is left on it).
   */
  private async revoke(session: EtcdSession, retry: boolean): Promise<void> {
    const attempt = (): Promise<boolean> =>
      withTimeout(session.lease.revoke(this.deadline()), this.commandTimeoutMs, () => new Error('revoke timed out')).then(
        () => true,
        () => false,
      );
    if ((await attempt()) || !retry) return;
    for (const delay of REVOKE_RETRY_DELAYS_MS) {
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
      if (await attempt()) return;
    }
  }

  /** Every lease on this session is presumed lost; waiters re-queue under a new session. */
  private loseSession(session: EtcdSession, detail: string): void {
    if (session.lost) return;
    session.end();
    this.sessions.delete(session);
    if (this.session === session) this.session = undefined;
    // Stop keep-alives; revoking frees our keys at once if etcd is reachable.
    void this.revoke(session, false);
    const holders = [...session.holders];
    session.holders.clear();
    for (const owner of holders) {
      this.holding.delete(owner);
      for (const listener of this.lossListeners) listener(owner, detail);
    }
    for (const owner of [...session.waiters]) this.turns.wake(owner);
  }

  /**
   * A linearizable read (it needs a leader and a quorum, unlike a member's status) within
   * `timeoutMs`.
   */
  async ping(timeoutMs: number): Promise<void> {
    await boundedCall({
      backend: this.name,
      operation: 'ping',
      closed: this.closed,
      send: () => this.client.kv.range({ key: Buffer.from(`${this.prefix}__health`), keys_only: true }, { deadline: new Date(Date.now() + timeoutMs) }),
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms`,
    });
  }

  /**
   * One request, bounded by commandTimeoutMs. A write whose answer never came may still be
   * applied later; `cleanupKey` is then deleted a few times over the next seconds (the deletes
   * follow the write on the same connection), and `session`, the lease it rides on, is retired —
   * revoked once unused — so a late put cannot leave a key that blocks the queue while our process
   * lives. An answer saying the session lease does not exist means the session is lost.
   */
  private call<T>(operation: string, key: string, send: () => Promise<T>, cleanupKey?: string, session?: EtcdSession): Promise<T> {
    return boundedCall({
      backend: this.name,
      operation,
      key,
      closed: this.closed,
      send,
      timeoutMs: this.commandTimeoutMs,
      timedOut: () => `no answer within ${this.commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: (error) => {
        if (session && isLeaseNotFound(error)) {
          // A definite answer: nothing was written, and every key on the lease is gone.
          this.loseSession(session, `the session lease ${session.id} no longer exists on the server (revoked or expired)`);
          return;
        }
        if (cleanupKey !== undefined) this.scheduleCleanup(cleanupKey);
        if (session) this.retire(session);
      },
    });
  }

  /**
   * gRPC call options: a request that is truly stuck is cancelled on both sides, not left to hang
   * — but only well after our own timeout gave up on it (see GRPC_DEADLINE_SLACK_MS).
   */
  private deadline(): { deadline: Date } {
    // Not holding the process (before bootstrap, during shutdown): no request may outlive our own
    // timeout by much, or its pending gRPC call would keep a closing process alive.
    const slack = this.holdsProcess ? GRPC_DEADLINE_SLACK_MS : 0;
    return { deadline: new Date(Date.now() + this.commandTimeoutMs + slack) };
  }

  private scheduleCleanup(myKey: string): void {
    this.cleaning.set(myKey, (this.cleaning.get(myKey) ?? 0) + 1);
    CLEANUP_DELAYS_MS.forEach((delay, i) => {
      setTimeout(() => {
        if (i === CLEANUP_DELAYS_MS.length - 1) {
          const left = this.cleaning.get(myKey)! - 1;
          if (left > 0) this.cleaning.set(myKey, left);
          else this.cleaning.delete(myKey);
        }
        // With a deadline like every other request: a delete sent into a partition would
        // otherwise stay pending for good, and keep a closed application's process alive.
        void this.client.kv.deleteRange({ key: Buffer.from(myKey) }, this.deadline()).catch(() => undefined);
      }, delay).unref();
    });
  }
}

/** etcd's answer to a write on a lease it does not have: `etcdserver: requested lease not found`. */
function isLeaseNotFound(error: unknown): boolean {
  for (let e = error as { name?: string; message?: string; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (e.constructor?.name === 'EtcdLeaseInvalidError' || /requested lease not found/.test(String(e.message))) return true;
  }
  return false;
}

/** The end of the range of keys starting with `prefix` (etcd's "prefix + 1"). */
function prefixEnd(prefix: string): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i] += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}
