import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { BusyKeys } from '../busy-keys.js';
import { nextTurn, type LineOperations } from '../ordered-queue.js';
import type { AcquireRequest, AcquireResult } from '../lock-backend.interface.js';
import { permitsMismatch } from '../semaphore.util.js';
import type { EtcdCalls } from './etcd-calls.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import type { EtcdHolders } from './etcd-holders.js';
import type { EtcdQueue, Queued } from './etcd-queue.js';
import { acquireAllTxn, acquireTxn, handedOver, isLeaseNotFound, oldestRange, permitsOf, predecessorTxn, recordGrantTxn, type EtcdCleanup, type HandOff } from './etcd-requests.util.js';
import type { EtcdSession } from './etcd-session.js';
import type { EtcdSessions } from './etcd-sessions.js';

/** Most keys one multi-key txn takes (etcd's default --max-txn-ops is 128; half of it leaves room). */
const MAX_TXN_KEYS = 64;

/** What the acquire protocol works with: the backend's client, calls, sessions, queue and holders. */
export interface EtcdAcquireParts {
  readonly name: string;
  readonly client: EtcdClientLike;
  readonly calls: EtcdCalls;
  readonly cleanup: EtcdCleanup;
  readonly sessions: EtcdSessions;
  readonly queued: EtcdQueue;
  readonly holders: EtcdHolders;
  lockPrefix(key: string): string;
}

/**
 * The acquire protocol of an etcd backend (its class comment says why it is safe): a first attempt
 * takes the free key or joins the line in one txn; a queued owner's next attempt reads whether a
 * key older than its own is left, and once none is, holds: handed over by the release ahead of it,
 * or else once one more write records its grant.
 */
export class EtcdAcquisition {
  private readonly busyKeys = new BusyKeys();

  constructor(private readonly parts: EtcdAcquireParts) {}

  /** Keys seen busy lately (see LockBackend.bookkeeping). */
  busyKeyCache(): string[] {
    return this.busyKeys.keys();
  }

  /**
   * First attempt of an owner: one txn that takes the free key, or joins the queue when asked to.
   * If etcd says the session lease does not exist (revoked, or expired before its keep-alive
   * told us), the session is lost: its holders are told, and the attempt is made once more on a
   * new session instead of failing every acquire until the keep-alive notices.
   */
  async enqueue(request: AcquireRequest, retried = false): Promise<AcquireResult> {
    const { key, owner, queue } = request;
    const prefix = this.parts.lockPrefix(key);
    const myKey = prefix + owner;
    if (this.parts.cleanup.has(myKey)) {
      // Its key is being deleted in the background: a grant on it could vanish under the holder.
      throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'an earlier write of this owner had an unknown outcome; retry with a new owner id', { key });
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
        response = await this.parts.calls.call(
          'acquire',
          key,
          () => this.parts.client.kv.txn(acquireTxn(prefix, myKey, session.id, queue && !lean, withOldest), this.parts.calls.deadline()),
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
        this.parts.cleanup.schedule(myKey);
        throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'the session lease was lost while acquiring', { key });
      }
      if (response.succeeded) return this.parts.holders.granted(owner, session, revision);
      // Our key from an earlier copy of this txn: its create revision is our place in line.
      const earlier: { create_revision: string } | undefined = response.responses[0].response_range.kvs[0];
      if (!queue) {
        // A single try writes only when the key was free: that earlier copy took the lock, then.
        if (earlier) return this.parts.holders.granted(owner, session, BigInt(earlier.create_revision));
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
        await this.parts.calls.call('release', key, () => this.parts.client.kv.deleteRange({ key: Buffer.from(myKey) }, this.parts.calls.deadline()), myKey, session).catch(() => undefined);
        throw permitsMismatch(key, found, 1);
      }
      const keys: string[] = response.responses[2].response_range.kvs.map((kv: { key: Buffer }) => kv.key.toString());
      const entry: Queued = { session, key: myKey, rev: earlier ? BigInt(earlier.create_revision) : revision };
      // With an earlier copy, the newest keys may be behind ours: let a re-check find our predecessor.
      this.parts.queued.join(owner, entry, earlier ? undefined : keys.find((k) => k !== myKey));
      return { acquired: false };
    } finally {
      this.parts.sessions.endIfDrained(session);
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
    const prefixes = keys.map((key) => this.parts.lockPrefix(key));
    const myKeys = prefixes.map((prefix, i) => prefix + owners[i]);
    if (myKeys.some((k) => this.parts.cleanup.has(k))) return { acquired: false };
    const session = await this.sessionFor(keys[0]);
    session.pending += 1;
    try {
      // A txn whose answer never came may still be applied: every key is deleted behind it.
      const response = await this.parts.calls.call('acquire', keys[0], () => this.parts.client.kv.txn(acquireAllTxn(prefixes, myKeys, session.id), this.parts.calls.deadline()), myKeys, session);
      if (session.lost) {
        for (const k of myKeys) this.parts.cleanup.schedule(k);
        throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'the session lease was lost while acquiring', { key: keys[0] });
      }
      if (!response.succeeded) return { acquired: false };
      const token = BigInt(response.header.revision);
      for (const owner of owners) this.parts.holders.granted(owner, session, token);
      return { acquired: true, token };
    } finally {
      session.pending -= 1;
      this.parts.sessions.endIfDrained(session);
    }
  }

  /** The session a new key goes on: not retired, not lost. */
  async sessionFor(key: string): Promise<EtcdSession> {
    let session = await this.parts.sessions.get(key);
    // Retired (or lost) while we waited for it: no new key may go on it.
    for (let i = 0; i < 3 && (session.retired || session.lost); i++) session = await this.parts.sessions.get(key);
    if (session.retired || session.lost) {
      throw new LockBackendUnavailableError(this.parts.name, 'acquire', 'every new session was retired at once (writes keep timing out)', { key });
    }
    return session;
  }

  /**
   * A busy key's oldest entry says what holds it: a plain lock (1) or a semaphore (its permits).
   * `found` is the read when the txn carried it; else one read now (a busy single try of a key not
   * seen busy lately: the uncontended txn stays as lean as before).
   */
  private async permitsFound(key: string, prefix: string, found?: { response_range: { kvs: Array<{ value?: Buffer }> } }): Promise<number> {
    const oldest = found ?? { response_range: await this.parts.calls.call('acquire', key, () => this.parts.client.kv.range(oldestRange(prefix).request_range, this.parts.calls.deadline())) };
    return permitsOf(oldest.response_range.kvs[0]?.value);
  }

  /**
   * A queued owner's next attempt (the kit's ordered-queue recipe, nextTurn): read-only (no raft
   * write, no fsync) while a key older than ours is left. None left: the lock is ours — handed
   * over by the holder ahead (our key carries HANDED: its mod revision, the revision that deleted
   * the holder's key, is our token), or else once one more write records the grant (its revision is
   * the token: see recordGrantTxn). undefined: our key is gone, start over.
   */
  recheck({ key, owner }: AcquireRequest, entry: Queued): Promise<AcquireResult | undefined> {
    return nextTurn(this.lineOf(key), owner, entry);
  }

  /** The server's side of the recipe for one key's line. */
  private lineOf(key: string): LineOperations<Queued, HandOff | undefined> {
    const { calls, client, queued, holders } = this.parts;
    return {
      // Our place, our own key and the key just behind ours, in one read.
      look: async (_owner, entry) => {
        const response = await calls.call('acquire', key, () => client.kv.txn(predecessorTxn(this.parts.lockPrefix(key), entry.key, entry.rev), calls.deadline()));
        if (!response.succeeded) return GONE;
        const [ahead, own, behind] = response.responses.map((r: { response_range: { kvs: EtcdKv[] } }) => r.response_range.kvs[0]) as Array<EtcdKv | undefined>;
        if (ahead) return { kind: 'ahead', predecessor: ahead.key.toString() };
        // Our successor now, if it is a plain waiter (an empty value): our release hands it the lock.
        const grant: HandOff | undefined =
          behind && (!behind.value || behind.value.length === 0) ? { myRev: entry.rev, next: Buffer.from(behind.key), nextRev: BigInt(behind.create_revision) } : undefined;
        return handedOver(own) ? { kind: 'handed', token: BigInt(own!.mod_revision), grant } : { kind: 'first', grant };
      },
      current: (owner, entry) => queued.get(owner) === entry,
      lost: (entry) => entry.session.lost,
      watchAhead: (owner, entry, predecessor) => {
        if (predecessor !== entry.predecessor) queued.watchPredecessor(owner, entry, predecessor);
      },
      // A put on our own key, only if it is still ours (a late copy of it after our key is gone
      // writes nothing): an unknown outcome needs no clean-up.
      record: async (_owner, entry) => {
        const recorded = await calls.call('acquire', key, () => client.kv.txn(recordGrantTxn(entry.key, entry.rev), calls.deadline()));
        return recorded.succeeded ? BigInt(recorded.header.revision) : undefined;
      },
      // Holder first, then out of the queue: the session is never seen unused in between. The
      // forced-release watch starts at the grant (a watch from our older create revision may find
      // it compacted).
      grant: (owner, entry, token, handOff) => {
        const result = holders.granted(owner, entry.session, token, handOff);
        queued.drop(owner);
        return result;
      },
      drop: (owner) => queued.drop(owner),
    };
  }
}

const GONE = { kind: 'gone' } as const;

/** A key as a range answers it. */
interface EtcdKv {
  key: Buffer;
  value?: Buffer;
  create_revision: string;
  mod_revision: string;
}
