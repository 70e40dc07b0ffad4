import { LossListeners } from '../loss-listeners.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { ETCD_CAPABILITIES, ETCD_DEFAULTS, type EtcdBackendConfig } from './etcd-backend.options.js';
import { closeEtcdClient } from './etcd-client.factory.js';
import { EtcdCleanup, etcdLockPrefix, handOffTxn } from './etcd-requests.util.js';
import { EtcdQueue } from './etcd-queue.js';
import { EtcdAdmin } from './etcd-admin.js';
import { EtcdSessions } from './etcd-sessions.js';
import { DEFAULT_DRIFT_FACTOR } from '../../common/checks.util.js';
import { EtcdSemaphores } from './etcd-semaphore.js';
import { permitsOf } from '../semaphore.util.js';
import { EtcdCalls } from './etcd-calls.js';
import { EtcdHolders } from './etcd-holders.js';
import { EtcdAcquisition } from './etcd-acquire.js';

/**
 * `correctness` locks on etcd, following etcd's concurrency recipe: every acquirer puts a key
 * `<prefix><key>/<owner>` on a shared session lease; the lowest create revision holds the lock;
 * each waiter watches only its predecessor's deletion (FIFO, no herd).
 *
 * The fencing token is a revision, etcd's raft-replicated counter of every write (it never goes
 * backwards across leader failover), kept on the holder's key as its mod revision, so `inspect()`
 * from any process reports it. A free key's token is its put's revision: nothing was there, so
 * every earlier holder's key was deleted before it. A waiter's grant is a write on its own key,
 * whose revision is its token — not its key's create revision, which dates from when it made its
 * place in line: a key granted elsewhere meanwhile has a larger one, and a multi-key lease's token
 * is the largest of its keys'. Usually the holder ahead makes that write: its release deletes its
 * key and writes HANDED on its successor's (known at its grant) in one txn (handOffTxn), so the
 * successor's token is the revision that deleted its predecessor's key, with no write of its own.
 * Otherwise (no successor known, it left, the holder's key vanished) the waiter records its grant
 * by one more put after the read that found nobody ahead (recordGrantTxn). So every token is
 * larger than every token granted before it on any key. (In
 * 0.1.0 a waiter's token was the revision of the read that found no predecessor left: a process
 * of that version beside one of this version can make the next holder's token smaller than its
 * own, which a fence refuses — it fails safe.)
 *
 * A lock's own ttl: the session lease is shared, so the engine deletes the key itself when the
 * ttl runs out (and aborts the signal). If the process cannot (paused, crashed, partitioned), the
 * session lease expires on the server and takes the key with it: a lock outlives its ttl only by
 * at most the session ttl, and only when its holder is unhealthy.
 *
 * Semaphores (requests with `permits`, etcd-semaphore.ts) use the same keys with the permits as the
 * value; a plain acquire that finds the key busy reads its oldest key's value (in the full txn, or
 * one read after a busy single try) and refuses a semaphore's key.
 */
export class EtcdBackend implements LockBackend {
  readonly capabilities = ETCD_CAPABILITIES;
  readonly name: string;
  private readonly client: EtcdClientLike;
  private readonly prefix: string;
  private readonly calls: EtcdCalls;
  private readonly queued: EtcdQueue;
  /** Owner → session, for every owner holding a lock. */
  private readonly holders: EtcdHolders;
  private readonly acquisition: EtcdAcquisition;
  private readonly lossListeners = new LossListeners();
  private readonly cleanup: EtcdCleanup;
  private readonly sessions: EtcdSessions;
  private readonly admin: EtcdAdmin;
  private readonly sessionTtlMs: number;
  private closed = false;
  private holdsProcess = true;
  private readonly ownsClient: boolean;
  private semaphores?: EtcdSemaphores;

  constructor(config: EtcdBackendConfig) {
    this.client = config.client;
    this.ownsClient = config.ownsClient;
    this.name = config.name ?? 'etcd';
    this.prefix = config.prefix ?? ETCD_DEFAULTS.prefix;
    const commandTimeoutMs = config.commandTimeoutMs ?? ETCD_DEFAULTS.commandTimeoutMs;
    const closed = (): boolean => this.closed;
    this.calls = new EtcdCalls({
      name: this.name,
      client: this.client,
      healthKey: `${this.prefix}__health`,
      commandTimeoutMs,
      closed,
      holdsProcess: () => this.holdsProcess,
      cleanUp: (myKey) => this.cleanup.schedule(myKey),
      lose: (session, detail) => this.sessions.lose(session, detail),
      retire: (session) => this.sessions.retire(session),
    });
    const deadline = (): { deadline: Date } => this.calls.deadline();
    this.sessions = new EtcdSessions({
      client: this.client,
      name: this.name,
      sessionTtlSeconds: config.sessionTtlSeconds ?? ETCD_DEFAULTS.sessionTtlSeconds,
      commandTimeoutMs,
      driftFactor: config.driftFactor ?? DEFAULT_DRIFT_FACTOR,
      deadline,
      call: (operation, key, send) => this.calls.call(operation, key, send),
      closed,
      lost: (session, detail) => this.holders.sessionLost(session, detail),
    });
    this.cleanup = new EtcdCleanup(this.client, deadline);
    this.sessionTtlMs = (config.sessionTtlSeconds ?? ETCD_DEFAULTS.sessionTtlSeconds) * 1_000;
    this.admin = new EtcdAdmin(this.client, this.prefix, deadline, (owner) => this.holders.forced(owner));
    this.queued = new EtcdQueue(this.client, (session) => this.sessions.endIfDrained(session));
    const { admin, sessions, queued, lossListeners } = this;
    this.holders = new EtcdHolders({ admin, sessions, queued, lossListeners, holdsProcess: () => this.holdsProcess });
    const { client, calls, cleanup, holders } = this;
    this.acquisition = new EtcdAcquisition({ name: this.name, client, calls, cleanup, sessions, queued, holders, lockPrefix: (key) => this.lockPrefix(key) });
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  /** The range of one lock's keys: `<prefix><encoded key>/`. */
  lockPrefix(key: string): string {
    return etcdLockPrefix(this.prefix, key, this.name);
  }

  /** Until when the session lease `owner`'s key rides on is known to live (see EtcdHolders.validUntil). */
  validUntil(owner: string): number | undefined {
    return this.holders.validUntil(owner);
  }

  /** This backend's semaphores (requests with `permits` ≥ 2): the same keys, sessions, queues and forced-release watch. */
  private semaphoreOf(): EtcdSemaphores {
    const { name, client, queued, cleanup } = this;
    return (this.semaphores ??= new EtcdSemaphores({
      name,
      client,
      queued,
      cleanup,
      lockPrefix: (key: string) => this.lockPrefix(key),
      session: (key: string) => this.acquisition.sessionFor(key),
      call: this.calls.call.bind(this.calls),
      deadline: () => this.calls.deadline(),
      granted: this.holders.granted.bind(this.holders),
      endIfDrained: this.sessions.endIfDrained.bind(this.sessions),
    }));
  }

  /** See LockBackend.bookkeeping (not EtcdCleanup's keys: their retried deletes end by themselves within 10 s). */
  bookkeeping(): Record<string, string[]> {
    const { holders, queued, sessions, acquisition } = this;
    return { holders: holders.owners(), ...queued.bookkeeping(), ...sessions.bookkeeping(), busyKeyCache: acquisition.busyKeyCache() };
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    if (permitsOf(request) > 1) return this.semaphoreOf().acquire(request);
    const queued = this.queued.get(request.owner);
    if (queued && !queued.session.lost) {
      const result = await this.acquisition.recheck(request, queued);
      if (result) return result;
    } else if (queued) {
      this.queued.drop(request.owner);
    }
    return this.acquisition.enqueue(request);
  }

  /** Several locks in one txn, or none (a multi-key lease's first try: see EtcdAcquisition.acquireAll). */
  acquireAll(keys: readonly string[], owners: readonly string[], ttlMs: number): Promise<AcquireResult> {
    return this.acquisition.acquireAll(keys, owners, ttlMs);
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
    const session = this.holders.sessionOf(owner);
    if (!session || session.lost) return false;
    const myKey = Buffer.from(this.lockPrefix(key) + owner);
    const response = await this.calls.call('extend', key, () => this.client.kv.range({ key: myKey, keys_only: true }, this.calls.deadline()));
    return response.kvs.length === 1 && !session.lost;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const myKey = Buffer.from(this.lockPrefix(key) + owner);
    const waitedOn = this.queued.get(owner)?.session;
    this.queued.drop(owner);
    const handOff = this.holders.handOffOf(owner);
    const session = this.holders.remove(owner);
    // Before bootstrap, an idle session must not keep the process alive (its keep-alives would).
    if (!this.holdsProcess && (session ?? waitedOn)) this.sessions.retire((session ?? waitedOn)!);
    // If the delete's answer is lost (a leader election can hold a request for seconds), keep
    // trying in the background and retire the session: the healthy session would otherwise keep
    // the key alive.
    // A holder that knows its successor hands it the lock in the same txn (handOffTxn).
    const deleted = handOff
      ? await this.calls
          .call('release', key, () => this.client.kv.txn(handOffTxn(myKey.toString(), handOff), this.calls.deadline()), myKey.toString(), session ?? waitedOn)
          .then((response) => response.responses[0].response_delete_range.deleted)
      : await this.calls
          .call('release', key, () => this.client.kv.deleteRange({ key: myKey }, this.calls.deadline()), myKey.toString(), session ?? waitedOn)
          .then((response) => response.deleted);
    return Number(deleted) > 0 && session !== undefined;
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

  inspect(key: string): Promise<HeldLock | null> {
    const prefix = this.lockPrefix(key);
    return this.calls.call('inspect', key, () => this.admin.inspect(prefix, this.sessionTtlMs));
  }

  listKeys(prefix: string, max: number): Promise<string[]> {
    // The prefix is encoded as keys are: a lone surrogate has no encoding, so it is refused as in a key.
    etcdLockPrefix(this.prefix, prefix, this.name);
    return this.calls.call('listKeys', prefix, () => this.admin.listKeys(prefix, max));
  }

  async forceRelease(key: string): Promise<string | undefined> {
    const prefix = this.lockPrefix(key);
    // Every holder of a semaphore key; the one holder of a plain lock.
    const owners = await this.calls.call('forceRelease', key, () => this.admin.forceRelease(prefix));
    for (const owner of owners) this.holders.forced(owner);
    return owners[0];
  }

  /** A linearizable read (it needs a leader and a quorum) within `timeoutMs`. */
  ping(timeoutMs: number): Promise<void> {
    return this.calls.ping(timeoutMs);
  }
}
