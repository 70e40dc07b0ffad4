import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { AcquireRequest, AcquireResult } from '../lock-backend.interface.js';
import { nextTurn } from '../ordered-queue.js';
import { permitsMismatch } from '../semaphore.util.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import type { EtcdQueue, Queued } from './etcd-queue.js';
import { isLeaseNotFound, permitsOf, recordGrantTxn, type EtcdCleanup } from './etcd-requests.util.js';
import type { EtcdSession } from './etcd-session.js';
import { semaphoreEnterTxn, semaphoreRecheckTxn, semaphoreWindowRange } from './etcd-semaphore-requests.util.js';

/** The parts of an etcd backend its semaphores run on: one client, one set of sessions and queues. */
export interface EtcdSemaphoreParts {
  /** The backend's name, for errors. */
  readonly name: string;
  readonly client: EtcdClientLike;
  readonly queued: EtcdQueue;
  readonly cleanup: EtcdCleanup;
  lockPrefix(key: string): string;
  /** The session a new key goes on (not retired, not lost). */
  session(key: string): Promise<EtcdSession>;
  /** The backend's bounded call (see EtcdBackend.call). */
  call<T>(operation: string, key: string, send: () => Promise<T>, cleanupKey?: string, session?: EtcdSession): Promise<T>;
  deadline(): { deadline: Date };
  /** `owner` holds now (its session, the forced-release watch). */
  granted(owner: string, session: EtcdSession, token: bigint): AcquireResult;
  endIfDrained(session: EtcdSession): void;
}

interface Kv {
  key: Buffer;
  value?: Buffer;
  create_revision: string;
}

/**
 * An etcd backend's semaphores (requests with `permits` ≥ 2): etcd's semaphore recipe on the plain lock's
 * keys. Every acquirer puts `<prefix><key>/<owner>` on its session lease, with the permits as its
 * value; the first `permits` entries by create revision hold. A holder's entry stays among them
 * until it goes (entries created later sort after it), so at any revision every holder is among
 * the first `permits`: never more. A waiter watches the deletes of the entries ahead of it and
 * recounts with one read; its grant is recorded by a write whose revision is its token (see
 * recordGrantTxn). Every read sees the permits of the entries it returns: one that differs
 * (a plain lock's empty value counts as 1) refuses the caller, whose own entry is deleted first.
 *
 * Holding, extending and releasing are the plain lock's (same keys, same session bookkeeping):
 * a permit lives while its session does; the engine deletes it at its ttl, the session lease
 * takes it if its process stops, and the delete wakes the waiters.
 */
export class EtcdSemaphores {
  constructor(private readonly host: EtcdSemaphoreParts) {}

  /** Holding, extending, releasing and waiting are the plain lock's: only the acquisition differs. */
  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const permits = request.permits ?? 1;
    const queued = this.host.queued.get(request.owner);
    if (queued && !queued.session.lost) {
      const result = await this.recheck(request, queued);
      if (result) return result;
    } else if (queued) {
      this.host.queued.drop(request.owner);
    }
    if (!request.queue) {
      // A single try looks before it writes: busy or refused, it leaves nothing on the server.
      const response = await this.host.call('acquire', request.key, () =>
        this.host.client.kv.range(semaphoreWindowRange(this.host.lockPrefix(request.key), permits), this.host.deadline()),
      );
      const kvs = response.kvs as Kv[];
      this.refuseMismatch(request.key, kvs, permits);
      if (kvs.length >= permits) return { acquired: false };
    }
    return this.enter(request);
  }

  /** Put our entry and see where it stands: a permit, a place in line, or (single try) nothing left behind. */
  private async enter(request: AcquireRequest, retried = false): Promise<AcquireResult> {
    const { key, owner, queue, permits = 1 } = request;
    const prefix = this.host.lockPrefix(key);
    const myKey = prefix + owner;
    if (this.host.cleanup.has(myKey)) {
      throw new LockBackendUnavailableError(this.host.name, 'acquire', 'an earlier write of this owner had an unknown outcome; retry with a new owner id', { key });
    }
    const session = await this.host.session(key);
    session.pending += 1;
    try {
      let response;
      try {
        response = await this.host.call(
          'acquire',
          key,
          () => this.host.client.kv.txn(semaphoreEnterTxn(prefix, myKey, session.id, permits), this.host.deadline()),
          myKey,
          session,
        );
      } catch (error) {
        if (!retried && isLeaseNotFound(error)) return await this.enter(request, true);
        throw error;
      } finally {
        session.pending -= 1;
      }
      if (session.lost) {
        this.host.cleanup.schedule(myKey);
        throw new LockBackendUnavailableError(this.host.name, 'acquire', 'the session lease was lost while acquiring', { key });
      }
      const rev = BigInt(response.responses[1].response_range.kvs[0].create_revision);
      const window = response.responses[2].response_range.kvs as Kv[];
      const mismatch = this.mismatchIn(key, window, permits, myKey);
      if (mismatch || (!queue && !window.some((kv) => kv.key.toString() === myKey))) {
        // Refused, or a single try that found every permit taken: our entry goes at once.
        await this.deleteEntry(key, myKey, session);
        if (mismatch) throw mismatch;
        return { acquired: false };
      }
      if (window.some((kv) => kv.key.toString() === myKey)) return this.host.granted(owner, session, BigInt(response.header.revision));
      this.host.queued.joinBehind(owner, { session, key: myKey, rev }, prefix);
      return { acquired: false };
    } finally {
      this.host.endIfDrained(session);
    }
  }

  /**
   * A waiter's next attempt (the kit's ordered-queue recipe, nextTurn): one read; a permit ours is
   * recorded (its token). undefined: our entry is gone, start over.
   */
  private recheck({ key, owner, permits = 1 }: AcquireRequest, entry: Queued): Promise<AcquireResult | undefined> {
    const { host } = this;
    return nextTurn<Queued, undefined>(
      {
        look: async (_owner, entry) => {
          const response = await host.call('acquire', key, () => host.client.kv.txn(semaphoreRecheckTxn(host.lockPrefix(key), entry.key, entry.rev, permits), host.deadline()));
          if (!response.succeeded || entry.session.lost) return GONE;
          const window = response.responses[0].response_range.kvs as Kv[];
          // Thrown while queued: the engine's release takes our entry.
          this.refuseMismatch(key, window, permits, entry.key);
          // Not among the first `permits`: the watch of the line's deletes (joinBehind) wakes us.
          return window.some((kv) => kv.key.toString() === entry.key) ? { kind: 'first', grant: undefined } : { kind: 'ahead' };
        },
        current: (owner, entry) => host.queued.get(owner) === entry,
        lost: (entry) => entry.session.lost,
        watchAhead: () => undefined,
        record: async (_owner, entry) => {
          const recorded = await host.call('acquire', key, () => host.client.kv.txn(recordGrantTxn(entry.key, entry.rev), host.deadline()));
          return recorded.succeeded ? BigInt(recorded.header.revision) : undefined;
        },
        // Holder first, then out of the queue: the session is never seen unused in between.
        grant: (owner, entry, token) => {
          const result = host.granted(owner, entry.session, token);
          host.queued.drop(owner);
          return result;
        },
        drop: (owner) => host.queued.drop(owner),
      },
      owner,
      entry,
    );
  }

  private refuseMismatch(key: string, kvs: Kv[], permits: number, myKey?: string): void {
    const mismatch = this.mismatchIn(key, kvs, permits, myKey);
    if (mismatch) throw mismatch;
  }

  /**
   * The error when the oldest entry (not ours) has other permits. Only the oldest is judged: an
   * entry behind it with other permits is a caller about to refuse itself (it sees the oldest too),
   * and must not get an agreeing caller refused meanwhile; it still takes its place in the window
   * until it is gone, so nothing is admitted beyond the permits.
   */
  private mismatchIn(key: string, kvs: Kv[], permits: number, myKey?: string): Error | undefined {
    const oldest = kvs[0];
    if (!oldest || oldest.key.toString() === myKey) return undefined;
    const found = permitsOf(oldest.value);
    return found !== permits ? permitsMismatch(key, found, permits) : undefined;
  }

  /** Delete our own entry (a timed-out delete is retried in the background, see EtcdCleanup). */
  private async deleteEntry(key: string, myKey: string, session: EtcdSession): Promise<void> {
    await this.host
      .call('release', key, () => this.host.client.kv.deleteRange({ key: Buffer.from(myKey) }, this.host.deadline()), myKey, session)
      .catch(() => undefined);
  }
}

const GONE = { kind: 'gone' } as const;
