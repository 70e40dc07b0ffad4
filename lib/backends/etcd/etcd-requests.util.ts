import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import { isWellFormed } from '../../common/checks.util.js';

// The requests of etcd's lock recipe, as data: key layout, the acquire txn, the predecessor read,
// their deadlines, and the clean-up of a write whose outcome is unknown.

/**
 * `<prefix><encoded key>/`, the range of one lock's keys (`…/<owner>` each): the encoding keeps
 * `a` and `a/b` from sharing a range. A key with a lone surrogate has no encoding
 * (encodeURIComponent would throw a raw URIError): refused.
 */
export function etcdLockPrefix(prefix: string, key: string, backend: string): string {
  if (!isWellFormed(key)) {
    throw new InvalidLockOptionsError('key', 'it contains a lone UTF-16 surrogate (not well-formed Unicode)', `the ${backend} backend`);
  }
  return `${prefix}${encodeURIComponent(key)}/`;
}

/** An empty value (shared: never written to). */
const EMPTY = Buffer.alloc(0);

/** The end of the range of keys starting with `prefix` (etcd's "prefix + 1"). */
export function prefixEnd(prefix: string | Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i] += 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** etcd's answer to a write on a lease it does not have: `etcdserver: requested lease not found`. */
export function isLeaseNotFound(error: unknown): boolean {
  for (let e = error as { name?: string; message?: string; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (e.constructor?.name === 'EtcdLeaseInvalidError' || /requested lease not found/.test(String(e.message))) return true;
  }
  return false;
}

/**
 * The first attempt of `myKey` (under `prefix`) on session lease `lease`: take the key if the
 * lock's range is empty; else say whether `myKey` exists already, and when queueing, put it and
 * read the newest keys ahead.
 */
export function acquireTxn(prefix: string, myKey: string, lease: string, queue: boolean, withOldest = false): unknown {
  const start = Buffer.from(prefix);
  const range = { key: start, range_end: prefixEnd(start) };
  const mineKey = Buffer.from(myKey);
  const put = { request_put: { key: mineKey, value: EMPTY, lease } };
  const mine = { request_range: { key: mineKey, keys_only: true } };
  // Joining the queue puts our key unless it is there on this lease already: a copy of this txn
  // landing after an earlier one (etcd3's resend) must not write it again — a holder's key,
  // perhaps, whose mod revision is its token (a hand-over's write). On another lease (an owner
  // queued again on a new session after losing the old one) it is put: the key must go with the
  // lease kept alive now. A missing key compares as lease 0.
  const join = { request_txn: { compare: [{ key: mineKey, target: 'Lease', result: 'Equal', lease }], success: [], failure: [put] } };
  const failure: unknown[] = queue ? [mine, join, { request_range: { ...range, sort_order: 'Descend', sort_target: 'Create', limit: 2, keys_only: true } }] : [mine];
  // Last (`withOldest`, only when the key was busy lately: the lean txn of a free key stays as
  // it was): the oldest key with its value — a semaphore's entries say their permits there.
  if (withOldest) failure.push(oldestRange(prefix));
  return {
    // The range is empty: nobody holds or waits.
    compare: [{ key: start, range_end: range.range_end, target: 'Create', result: 'Equal', create_revision: 0 }],
    success: [put],
    // Busy. First: is the key ours already? etcd3 retries a request whose answer was lost to a
    // broken connection, so an earlier copy of this very txn may have written it. Then, when
    // queueing: join (unless in on this lease already) behind the newest key (limit 2: our own put
    // may be among them).
    failure,
  };
}

/**
 * Several locks in one txn, or none: if every lock's range is empty (nobody holds or waits), put
 * `myKeys[i]` under each on the session lease. The txn's revision is the token of all of them.
 */
export function acquireAllTxn(prefixes: readonly string[], myKeys: readonly string[], lease: string): unknown {
  return {
    compare: prefixes.map((prefix) => {
      const start = Buffer.from(prefix);
      return { key: start, range_end: prefixEnd(start), target: 'Create', result: 'Equal', create_revision: 0 };
    }),
    success: myKeys.map((key) => ({ request_put: { key: Buffer.from(key), value: EMPTY, lease } })),
    failure: [],
  };
}

/** The oldest key of a lock (its holder), with its value: empty for a plain lock, the permits for a semaphore. */
export function oldestRange(prefix: string): { request_range: Record<string, unknown> } {
  const start = Buffer.from(prefix);
  return { request_range: { key: start, range_end: prefixEnd(start), sort_order: 'Ascend', sort_target: 'Create', limit: 1 } };
}

/** The value of a semaphore's entry: its permits, in decimal (a plain lock's key is empty). */
export function semaphoreValue(permits: number): Buffer {
  return Buffer.from(String(permits));
}

/** The permits an entry's value says (1: a plain lock's empty value). */
export function permitsOf(value: Buffer | Uint8Array | undefined): number {
  return !value || value.length === 0 ? 1 : Number(Buffer.from(value).toString());
}

/**
 * A queued key's re-check: if `myKey` still has create revision `rev`, read the newest key of the
 * lock created before it (none left: the lock is ours), our own key (its value says whether the
 * holder ahead handed the lock over: see handOffTxn), and the oldest key created after ours (our
 * successor, whom our release hands the lock to).
 */
export function predecessorTxn(prefix: string, myKey: string, rev: bigint): unknown {
  const start = Buffer.from(prefix);
  const range = { key: start, range_end: prefixEnd(start), sort_target: 'Create', limit: 1 };
  return {
    compare: [{ key: Buffer.from(myKey), target: 'Create', result: 'Equal', create_revision: rev.toString() }],
    success: [
      { request_range: { ...range, sort_order: 'Descend', max_create_revision: (rev - 1n).toString(), keys_only: true } },
      { request_range: { key: Buffer.from(myKey) } },
      { request_range: { ...range, sort_order: 'Ascend', min_create_revision: (rev + 1n).toString() } },
    ],
    failure: [],
  };
}

/**
 * The value a hand-off writes on its successor's key: "1", which every version reads as a plain
 * lock's (a semaphore entry of 1 permit). Nothing else ever writes it on a plain waiter's key —
 * its own acquire txn writes an empty value (also when etcd3 sends a copy again), its own grant
 * record keeps the value — so a waiter that finds it on its key, with nobody ahead, was handed the
 * lock at that key's mod revision.
 */
export const HANDED = Buffer.from('1');

/** Whether a waiter's own key carries a hand-off (HANDED, written after its create). */
export function handedOver(kv: { value?: Buffer | Uint8Array; create_revision: string; mod_revision: string } | undefined): boolean {
  return kv !== undefined && kv.value !== undefined && HANDED.equals(Buffer.from(kv.value)) && BigInt(kv.mod_revision) > BigInt(kv.create_revision);
}

/** A plain holder's successor, told at its grant: the next key in line, and its create revision. */
export interface HandOff {
  readonly myRev: bigint;
  readonly next: Buffer;
  readonly nextRev: bigint;
}

/**
 * A plain holder's release that hands the lock to its successor: if our key (create revision
 * `myRev`) and the successor's (`nextRev`) are both still there, delete ours and write HANDED on
 * theirs (its lease kept) in one txn — the successor's mod revision, the revision that deleted our
 * key, is its token, larger than ours, with no write of its own; else only delete ours. Either way
 * `responses[0]` says how many keys of ours were deleted.
 */
export function handOffTxn(myKey: string, handOff: HandOff): unknown {
  const mine = Buffer.from(myKey);
  const remove = { request_delete_range: { key: mine } };
  return {
    compare: [
      { key: mine, target: 'Create', result: 'Equal', create_revision: handOff.myRev.toString() },
      { key: handOff.next, target: 'Create', result: 'Equal', create_revision: handOff.nextRev.toString() },
    ],
    success: [remove, { request_put: { key: handOff.next, value: HANDED, ignore_lease: true } }],
    failure: [remove],
  };
}

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

/**
 * gRPC call options: a request that is truly stuck is cancelled on both sides, not left to hang
 * — but only well after our own timeout gave up on it. Not holding the process (before bootstrap,
 * during shutdown): no request may outlive our own timeout by much, or its pending gRPC call
 * would keep a closing process alive.
 */
export function grpcDeadline(commandTimeoutMs: number, holdsProcess: boolean): { deadline: Date } {
  return { deadline: new Date(Date.now() + commandTimeoutMs + (holdsProcess ? GRPC_DEADLINE_SLACK_MS : 0)) };
}

/** Retry a clean-up this many ms after a write whose outcome is unknown (it may still land). */
const CLEANUP_DELAYS_MS = [0, 1_000, 3_000, 10_000];

/** Keys of ours whose write had an unknown outcome, deleted a few times over the next seconds. */
export class EtcdCleanup {
  /** Keys with clean-up deletes still scheduled (count per key). */
  private readonly cleaning = new Map<string, number>();

  constructor(
    private readonly client: EtcdClientLike,
    private readonly deadline: () => { deadline: Date },
  ) {}

  /** A grant on a key being deleted in the background could vanish under its holder. */
  has(myKey: string): boolean {
    return this.cleaning.has(myKey);
  }

  schedule(myKey: string): void {
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

/**
 * A waiter's grant, recorded: a put that keeps the key's value and lease (only its mod revision
 * moves), if it is still the key of create revision `rev`. Its revision is the holder's token,
 * and stays on the server as the key's mod revision (what `inspect()` reports).
 *
 * Why not the key's create revision: a plain lock's waiter made its place in line before other
 * keys were granted meanwhile, and a multi-key lease's token is the largest of its keys' tokens
 * — the next holder of one of its keys must outgrow all of them. A semaphore's waiters learn of
 * their grants in any order: two permits freed, the later entry may read first and be granted
 * with the larger create revision, then the earlier one with a smaller token after it. Nor the
 * revision of the read that saw the grant: two waiters reading at one revision would get the same
 * token, and no other process could tell it. A write's revision is unique and later than every
 * write before it, and every token granted before (a free key's put, or another waiter's recorded
 * grant) is such a write that had been applied before this one was sent: so it is strictly
 * larger than any token granted before, on any key.
 */
export function recordGrantTxn(myKey: string, rev: bigint): unknown {
  const mine = Buffer.from(myKey);
  return {
    compare: [{ key: mine, target: 'Create', result: 'Equal', create_revision: rev.toString() }],
    success: [{ request_put: { key: mine, ignore_value: true, ignore_lease: true } }],
    failure: [],
  };
}
