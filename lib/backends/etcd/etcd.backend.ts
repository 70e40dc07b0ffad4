// Over 250 lines on purpose: the acquire protocol (enqueue, recheck, release) and its handling of
// writes with an unknown outcome read best together. The requests, the queue and its watches,
// the session leases and the clean-up live in the files beside this one.
import { AnswerDeadlines } from '../answer-deadlines.js';
import { LossListeners } from '../loss-listeners.js';
import { BusyKeys } from '../busy-keys.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { ETCD_CAPABILITIES, ETCD_DEFAULTS, type EtcdBackendConfig } from './etcd-backend.options.js';
import { closeEtcdClient } from './etcd-client.factory.js';
import { acquireAllTxn, acquireTxn, EtcdCleanup, etcdLockPrefix, grpcDeadline, isLeaseNotFound, oldestRange, permitsOf, predecessorTxn, recordGrantTxn } from './etcd-requests.util.js';
import { EtcdQueue, type Queued } from './etcd-queue.js';
import { EtcdAdmin } from './etcd-admin.js';
import { EtcdSessions } from './etcd-sessions.js';
import { DEFAULT_DRIFT_FACTOR } from '../../common/checks.util.js';
import { boundedCall } from '../backend-call.util.js';
import type { EtcdSession } from './etcd-session.js';
import { EtcdSemaphore } from './etcd-semaphore.js';
import { permitsMismatch } from '../semaphore.util.js';

/** Most keys one multi-key txn takes (etcd's default --max-txn-ops is 128; half of it leaves room). */
const MAX_TXN_KEYS = 64;

/**
 * `correctness` locks on etcd, following etcd's concurrency recipe: every acquirer puts a key
 * `<prefix><key>/<owner>` on a shared session lease; the lowest create revision holds the lock;
 * each waiter watches only its predecessor's deletion (FIFO, no herd).
 *
 * The fencing token is a revision, etcd's raft-replicated counter of every write (it never goes
 * backwards across leader failover), kept on the holder's key as its mod revision, so `inspect()`
 * from any process reports it. A free key's token is its put's revision: nothing was there, so
 * every earlier holder's key was deleted before it. A waiter's grant is recorded by one more put
 * on its key after the read that found nobody ahead (recordGrantTxn), its token that write's
 * revision — not its key's create revision, which dates from when it made its place in line: a
 * key granted elsewhere meanwhile has a larger one, and a multi-key lease's token is the largest
 * of its keys'. So every token is larger than every token granted before it on any key. (In
 * 0.1.0 a waiter's token was the revision of the read that found no predecessor left: a process
 * of that version beside one of this version can make the next holder's token smaller than its
 * own, which a fence refuses — it fails safe.)
 *
 * A lock's own ttl: the session lease is shared, so the engine deletes the key itself when the
 * ttl runs out (and aborts the signal). If the process cannot (paused, crashed, partitioned), the
 * session lease expires on the server and takes the key with it: a lock outlives its ttl only by
 * at most the session ttl, and only when its holder is unhealthy.
 *
 * Semaphores (`semaphore(permits)`, etcd-semaphore.ts) use the same keys with the permits as the
 * value; a plain acquire that finds the key busy reads its oldest key's value (in the full txn, or
 * one read after a busy single try) and refuses a semaphore's key.
 */
export class EtcdBackend implements LockBackend {
  readonly capabilities = ETCD_CAPABILITIES;
  readonly name: string;
  private readonly client: EtcdClientLike;
  private readonly prefix: string;
  private readonly commandTimeoutMs: number;
  private readonly busyKeys = new BusyKeys();
  /** One timer for the answer deadlines of all calls (see AnswerDeadlines). */
  private readonly deadlines: AnswerDeadlines;
  private readonly queued: EtcdQueue;
  /** Owner → session, for every owner holding a lock. */
  private readonly holding = new Map<string, EtcdSession>();
  private readonly lossListeners = new LossListeners();
  private readonly cleanup: EtcdCleanup;
  private readonly sessions: EtcdSessions;
  private readonly admin: EtcdAdmin;
  private readonly sessionTtlMs: number;
  private closed = false;
  private holdsProcess = true;
  private readonly ownsClient: boolean;
  private readonly views = new Map<number, EtcdSemaphore>();

  constructor(config: EtcdBackendConfig) {
    this.client = config.client;
    this.ownsClient = config.ownsClient;
    this.name = config.name ?? 'etcd';
    this.prefix = config.prefix ?? ETCD_DEFAULTS.prefix;
    this.commandTimeoutMs = config.commandTimeoutMs ?? ETCD_DEFAULTS.commandTimeoutMs;
    this.deadlines = new AnswerDeadlines(this.commandTimeoutMs);
    this.sessions = new EtcdSessions({
      client: this.client,
      name: this.name,
      sessionTtlSeconds: config.sessionTtlSeconds ?? ETCD_DEFAULTS.sessionTtlSeconds,
      commandTimeoutMs: this.commandTimeoutMs,
      driftFactor: config.driftFactor ?? DEFAULT_DRIFT_FACTOR,
      deadline: () => this.deadline(),
      call: (operation, key, send) => this.call(operation, key, send),
      closed: () => this.closed,
      lost: (session, detail) => this.sessionLost(session, detail),
    });
    this.cleanup = new EtcdCleanup(this.client, () => this.deadline());
    this.sessionTtlMs = (config.sessionTtlSeconds ?? ETCD_DEFAULTS.sessionTtlSeconds) * 1_000;
    this.admin = new EtcdAdmin(this.client, this.prefix, () => this.deadline(), (owner) => this.forced(owner));
    this.queued = new EtcdQueue(this.client, (session) => this.sessions.endIfDrained(session));
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  /** The range of one lock's keys: `<prefix><encoded key>/`. */
  lockPrefix(key: string): string {
    return etcdLockPrefix(this.prefix, key, this.name);
  }

  /**
   * Until when the session lease `owner`'s key rides on is known to live (monotonic): the lock
   * cannot be trusted past it whatever its own ttl, since etcd deletes the key with the lease.
   */
  validUntil(owner: string): number | undefined {
    const session = this.holding.get(owner);
    return session && !session.lost ? session.validUntilMs : undefined;
  }

  /** This backend's semaphores (`permits` ≥ 2): the same keys, sessions, queues and forced-release watch. */
  semaphore(permits: number): EtcdSemaphore {
    let view = this.views.get(permits);
    if (!view) {
      view = new EtcdSemaphore(
        {
          backend: this,
          client: this.client,
          queued: this.queued,
          cleanup: this.cleanup,
          lockPrefix: (key) => this.lockPrefix(key),
          session: (key) => this.sessionFor(key),
          call: (operation, key, send, cleanupKey, session) => this.call(operation, key, send, cleanupKey, session),
          deadline: () => this.deadline(),
          granted: (owner, session, token) => this.granted(owner, session, token),
          endIfDrained: (session) => this.sessions.endIfDrained(session),
        },
        permits,
      );
      this.views.set(permits, view);
    }
    return view;
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const queued = this.queued.get(request.owner);
    if (queued && !queued.session.lost) {
      const result = await this.recheck(request, queued);
      if (result) return result;
    } else if (queued) {
      this.queued.drop(request.owner);
    }
    return this.enqueue(request);
  }

  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.queued.wait(owner, timeoutMs, signal);
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
    this.queued.drop(owner);
    const session = this.holding.get(owner);
    this.holding.delete(owner);
    if (this.holding.size === 0) this.admin.idle();
    session?.holders.delete(owner);
    if (session) this.sessions.endIfDrained(session);
    // Before bootstrap, an idle session must not keep the process alive (its keep-alives would).
    if (!this.holdsProcess && (session ?? waitedOn)) this.sessions.retire((session ?? waitedOn)!);
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
    if (!hold) {
      this.sessions.retireCurrent();
      this.admin.unwatch();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.admin.close();
    this.queued.dropAll();
    await this.sessions.closeAll();
    if (this.ownsClient) closeEtcdClient(this.client);
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
    if (this.cleanup.has(myKey)) {
      // Its key is being deleted in the background: a grant on it could vanish under the holder.
      throw new LockBackendUnavailableError(this.name, 'acquire', 'an earlier write of this owner had an unknown outcome; retry with a new owner id', { key });
    }
    const session = await this.sessionFor(key);
    // A key not seen busy lately is likely free: the txn carries no queue join (a put and a range
    // read built, sent and encoded for nothing); busy after all, it goes again in full.
    const recentlyBusy = this.busyKeys.recentlyBusy(key);
    const lean = queue && !recentlyBusy;
    // A busy key may be a semaphore's: the full txn reads its oldest entry too (never the lean one).
    const withOldest = !lean && (queue || recentlyBusy);
    session.pending += 1;
    try {
      let response;
      try {
        response = await this.call(
          'acquire',
          key,
          () => this.client.kv.txn(acquireTxn(prefix, myKey, session.id, queue && !lean, withOldest), this.deadline()),
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
        this.cleanup.schedule(myKey);
        throw new LockBackendUnavailableError(this.name, 'acquire', 'the session lease was lost while acquiring', { key });
      }
      if (response.succeeded) return this.granted(owner, session, revision);
      // Our key from an earlier copy of this txn: its create revision is our place in line.
      const earlier: { create_revision: string } | undefined = response.responses[0].response_range.kvs[0];
      if (!queue) {
        // A single try writes only when the key was free: that earlier copy took the lock, then.
        if (earlier) return this.granted(owner, session, BigInt(earlier.create_revision));
        this.busyKeys.busy(key);
        const found = await this.permitsFound(key, prefix, withOldest ? response.responses[1] : undefined);
        if (found !== 1) throw permitsMismatch(key, found, 1);
        return { acquired: false };
      }
      this.busyKeys.busy(key);
      // Busy, or our key is there already: the full txn joins the queue, or finds our place in it.
      if (lean) return await this.enqueue(request, retried);
      const found = await this.permitsFound(key, prefix, response.responses[3]);
      if (found !== 1) {
        // A semaphore's key: our queue entry goes at once (a timed-out delete is retried in the background).
        await this.call('release', key, () => this.client.kv.deleteRange({ key: Buffer.from(myKey) }, this.deadline()), myKey, session).catch(() => undefined);
        throw permitsMismatch(key, found, 1);
      }
      const keys: string[] = response.responses[2].response_range.kvs.map((kv: { key: Buffer }) => kv.key.toString());
      const entry: Queued = { session, key: myKey, rev: earlier ? BigInt(earlier.create_revision) : revision };
      // With an earlier copy, the newest keys may be behind ours: let a re-check find our predecessor.
      this.queued.join(owner, entry, earlier ? undefined : keys.find((k) => k !== myKey));
      return { acquired: false };
    } finally {
      this.sessions.endIfDrained(session);
    }
  }

  /**
   * Several locks in one txn (a multi-key lease's first try): when every one of them is free —
   * nobody holds or waits — all keys are put on one session lease at one revision, the token of
   * all of them. Busy: nothing was written, and the lease goes on key by key through the queue.
   */
  async acquireAll(keys: readonly string[], owners: readonly string[], _ttlMs: number): Promise<AcquireResult> {
    // etcd refuses a txn of more than --max-txn-ops operations (128 by default): more keys go one by one.
    if (keys.length > MAX_TXN_KEYS) return { acquired: false };
    const prefixes = keys.map((key) => this.lockPrefix(key));
    const myKeys = prefixes.map((prefix, i) => prefix + owners[i]);
    if (myKeys.some((k) => this.cleanup.has(k))) return { acquired: false };
    const session = await this.sessionFor(keys[0]);
    session.pending += 1;
    try {
      // A txn whose answer never came may still be applied: every key is deleted behind it.
      const response = await this.call('acquire', keys[0], () => this.client.kv.txn(acquireAllTxn(prefixes, myKeys, session.id), this.deadline()), myKeys, session);
      if (session.lost) {
        for (const k of myKeys) this.cleanup.schedule(k);
        throw new LockBackendUnavailableError(this.name, 'acquire', 'the session lease was lost while acquiring', { key: keys[0] });
      }
      if (!response.succeeded) return { acquired: false };
      const token = BigInt(response.header.revision);
      for (const owner of owners) this.granted(owner, session, token);
      return { acquired: true, token };
    } finally {
      session.pending -= 1;
      this.sessions.endIfDrained(session);
    }
  }

  /** The session a new key goes on: not retired, not lost. */
  private async sessionFor(key: string): Promise<EtcdSession> {
    let session = await this.sessions.get(key);
    // Retired (or lost) while we waited for it: no new key may go on it.
    for (let i = 0; i < 3 && (session.retired || session.lost); i++) session = await this.sessions.get(key);
    if (session.retired || session.lost) {
      throw new LockBackendUnavailableError(this.name, 'acquire', 'every new session was retired at once (writes keep timing out)', { key });
    }
    return session;
  }

  /**
   * A busy key's oldest entry says what holds it: a plain lock (1) or a semaphore (its permits).
   * `found` is the read when the txn carried it; else one read now (a busy single try of a key not
   * seen busy lately: the uncontended txn stays as lean as before).
   */
  private async permitsFound(key: string, prefix: string, found?: { response_range: { kvs: Array<{ value?: Buffer }> } }): Promise<number> {
    const oldest = found ?? { response_range: await this.call('acquire', key, () => this.client.kv.range(oldestRange(prefix).request_range, this.deadline())) };
    return permitsOf(oldest.response_range.kvs[0]?.value);
  }

  /**
   * A queued owner's next attempt: read-only (no raft write, no fsync) while a key older than ours
   * is left. None left: the lock is ours once one more write records the grant (its revision is
   * the token: see recordGrantTxn). undefined: our key is gone, start over.
   */
  private async recheck({ key, owner }: AcquireRequest, entry: Queued): Promise<AcquireResult | undefined> {
    const response = await this.call('acquire', key, () =>
      this.client.kv.txn(predecessorTxn(this.lockPrefix(key), entry.key, entry.rev), this.deadline()),
    );
    if (!response.succeeded || entry.session.lost) {
      this.queued.drop(owner);
      return undefined;
    }
    const predecessor: string | undefined = response.responses[0].response_range.kvs[0]?.key.toString();
    if (predecessor !== undefined) {
      if (predecessor !== entry.predecessor) this.queued.watchPredecessor(owner, entry, predecessor);
      return { acquired: false };
    }
    // A put on our own key, only if it is still ours (a late copy of it after our key is gone
    // writes nothing): an unknown outcome needs no clean-up.
    const recorded = await this.call('acquire', key, () => this.client.kv.txn(recordGrantTxn(entry.key, entry.rev), this.deadline()));
    if (!recorded.succeeded || entry.session.lost) {
      this.queued.drop(owner);
      return undefined;
    }
    // Holder first, then out of the queue: the session is never seen unused in between. The
    // forced-release watch starts at the grant (a watch from our older create revision may find
    // it compacted).
    const result = this.granted(owner, entry.session, BigInt(recorded.header.revision));
    this.queued.drop(owner);
    return result;
  }

  private granted(owner: string, session: EtcdSession, token: bigint): AcquireResult {
    session.holders.add(owner);
    this.holding.set(owner, session);
    // Not before bootstrap (nor during shutdown): the watch's stream would keep the process alive.
    if (this.holdsProcess) this.admin.watch(token);
    return { acquired: true, token };
  }

  inspect(key: string): Promise<HeldLock | null> {
    const prefix = this.lockPrefix(key);
    return this.call('inspect', key, () => this.admin.inspect(prefix, this.sessionTtlMs));
  }

  listKeys(prefix: string, max: number): Promise<string[]> {
    // The prefix is encoded as keys are: a lone surrogate has no encoding, so it is refused as in a key.
    etcdLockPrefix(this.prefix, prefix, this.name);
    return this.call('listKeys', prefix, () => this.admin.listKeys(prefix, max));
  }

  async forceRelease(key: string): Promise<string | undefined> {
    const prefix = this.lockPrefix(key);
    // Every holder of a semaphore key; the one holder of a plain lock.
    const owners = await this.call('forceRelease', key, () => this.admin.forceRelease(prefix));
    for (const owner of owners) this.forced(owner);
    return owners[0];
  }

  /** `owner`'s key was deleted by a forced release: if it holds here, it holds no more. */
  private forced(owner: string): void {
    const session = this.holding.get(owner);
    if (!session) return;
    this.holding.delete(owner);
    if (this.holding.size === 0) this.admin.idle();
    session.holders.delete(owner);
    this.sessions.endIfDrained(session);
    this.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
  }

  /** The session's keys are gone: its holders lose their leases, its waiters re-queue on a new one. */
  private sessionLost(session: EtcdSession, detail: string): void {
    const holders = [...session.holders];
    session.holders.clear();
    for (const owner of holders) {
      this.holding.delete(owner);
      this.lossListeners.tell(owner, detail);
    }
    if (this.holding.size === 0) this.admin.idle();
    for (const owner of [...session.waiters]) this.queued.wake(owner);
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
  private call<T>(operation: string, key: string, send: () => Promise<T>, cleanupKey?: string | readonly string[], session?: EtcdSession): Promise<T> {
    return boundedCall({
      backend: this.name,
      operation,
      key,
      closed: this.closed,
      send,
      timeoutMs: this.commandTimeoutMs,
      deadlines: this.deadlines,
      timedOut: () => `no answer within ${this.commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: (error) => {
        if (session && isLeaseNotFound(error)) {
          // A definite answer: nothing was written, and every key on the lease is gone.
          this.sessions.lose(session, `the session lease ${session.id} no longer exists on the server (revoked or expired)`);
          return;
        }
        if (cleanupKey !== undefined) for (const k of typeof cleanupKey === 'string' ? [cleanupKey] : cleanupKey) this.cleanup.schedule(k);
        if (session) this.sessions.retire(session);
      },
    });
  }

  private deadline(): { deadline: Date } {
    return grpcDeadline(this.commandTimeoutMs, this.holdsProcess);
  }
}
