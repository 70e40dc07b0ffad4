import { prefixEnd, semaphoreValue } from './etcd-requests.util.js';

// The requests of a semaphore on etcd, as data. Its entries share the plain lock's layout
// (`<prefix><encoded key>/<owner>` on a session lease) with the permits as the value; the holders
// are the first `permits` entries by create revision (etcd's own semaphore recipe).

/** The first `permits` entries of a lock (`upTo`: only those created at or before it), with their values. */
function windowRange(prefix: string, permits: number, upTo?: bigint): { request_range: Record<string, unknown> } {
  const start = Buffer.from(prefix);
  const range: Record<string, unknown> = { key: start, range_end: prefixEnd(start), sort_order: 'Ascend', sort_target: 'Create', limit: permits };
  if (upTo !== undefined) range.max_create_revision = upTo.toString();
  return { request_range: range };
}

/** A single try's look before it writes: busy (all permits taken) or refused, it leaves no trace. */
export function semaphoreWindowRange(prefix: string, permits: number): Record<string, unknown> {
  return windowRange(prefix, permits).request_range;
}

/**
 * The first attempt of `myKey`: put it (an earlier copy of this txn, retried by etcd3 after a lost
 * answer, keeps its create revision: a put on an existing key does not change it), then read its
 * create revision and the first `permits` entries (reads in a txn see its own writes). Ours among
 * them: a holder, at this txn's revision.
 */
export function semaphoreEnterTxn(prefix: string, myKey: string, lease: string, permits: number): unknown {
  const mine = Buffer.from(myKey);
  return {
    compare: [],
    success: [
      { request_put: { key: mine, value: semaphoreValue(permits), lease } },
      { request_range: { key: mine, keys_only: true } },
      windowRange(prefix, permits),
    ],
    failure: [],
  };
}

/**
 * A waiter's re-check, read-only: if `myKey` still has create revision `rev`, the first `permits`
 * entries created up to it (ours among them: a permit is ours).
 */
export function semaphoreRecheckTxn(prefix: string, myKey: string, rev: bigint, permits: number): unknown {
  return {
    compare: [{ key: Buffer.from(myKey), target: 'Create', result: 'Equal', create_revision: rev.toString() }],
    success: [windowRange(prefix, permits, rev)],
    failure: [],
  };
}
