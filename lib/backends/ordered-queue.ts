import type { AcquireResult } from './lock-backend.interface.js';

/**
 * A queued waiter re-reads its place at least this often even without a wake-up: the fallback
 * for a watch event that never came (a reconnect between the watch's set-up and the deletion).
 */
export const LINE_RECHECK_MS = 5_000;

/**
 * Where one look at the line found a queued owner's entry.
 * - `gone`: its entry is not there any more (a forced release, its session's end): start over.
 * - `handed`: the holder ahead handed it the lock in its own release; `token` is the revision of
 *   that write (larger than the holder's token), so the grant needs no write of its own.
 * - `ahead`: somebody is still ahead of it: `predecessor` (the entry just ahead) is the one to watch
 *   (none: the backend's watch of the whole line covers it, as a semaphore waiter's does).
 * - `first`: nobody is ahead, but nothing vouches for a token yet: one write records the grant.
 *
 * `grant` is whatever the backend keeps with a new holder from that look (its successor in line,
 * whom its release will hand the lock to).
 */
export type LinePlace<Grant> =
  | { readonly kind: 'gone' }
  | { readonly kind: 'handed'; readonly token: bigint; readonly grant: Grant }
  | { readonly kind: 'ahead'; readonly predecessor?: string }
  | { readonly kind: 'first'; readonly grant: Grant };

/**
 * A line on the server — entries in the order they were created (etcd keys by create revision,
 * ZooKeeper sequential znodes) — as its backend works it. The recipe (nextTurn) decides; these
 * are the server's operations.
 */
export interface LineOperations<Entry, Grant> {
  /** One look at `entry`'s place (a read; the backend may batch its own key and the line in it). */
  look(owner: string, entry: Entry): Promise<LinePlace<Grant>>;
  /**
   * After an answer: `entry` is still `owner`'s queued entry (not released, replaced or dropped
   * while the answer was on the wire). When it is not, the answer describes nothing of ours.
   */
  current(owner: string, entry: Entry): boolean;
  /** Whether the session the entry rides on is known lost (its entry cannot be trusted). */
  lost(entry: Entry): boolean;
  /** Wake `owner` when `predecessor` is gone (or at once if it is gone already). */
  watchAhead(owner: string, entry: Entry, predecessor: string): void;
  /** First in line: one write on the entry records the grant; its revision is the token. undefined: the entry is gone. */
  record(owner: string, entry: Entry): Promise<bigint | undefined>;
  /** `owner` holds now, with `token`: out of the queue, into the holders. */
  grant(owner: string, entry: Entry, token: bigint, grant: Grant): AcquireResult;
  /** Forget `owner`'s entry here (its key, if any, is not deleted). */
  drop(owner: string, entry: Entry): void;
}

/**
 * The ordered-queue recipe: a queued owner's next attempt, after a wake-up (its predecessor's
 * deletion, the hand-over's write on its own entry) or the backend's periodic re-read. Each
 * waiter watches only the entry just ahead of its own — no thundering herd, FIFO — and:
 * - an answer that comes after the waiter was released (the look's or the record's) grants nothing:
 *   that release deleted its entry;
 * - a gone entry (or a lost session) starts over: undefined, after the entry is dropped;
 * - handed the lock, it holds with the hand-over's revision as its token;
 * - still behind somebody, it watches its (possibly new) predecessor and answers "not yet";
 * - first, it holds once one more write has recorded its grant: a token taken from the line's state
 *   at the read could be smaller than one granted meanwhile on another key (see the backends'
 *   class comments), a write's revision cannot.
 */
export async function nextTurn<Entry, Grant>(line: LineOperations<Entry, Grant>, owner: string, entry: Entry): Promise<AcquireResult | undefined> {
  const place = await line.look(owner, entry);
  if (!line.current(owner, entry)) return undefined;
  if (place.kind === 'gone' || line.lost(entry)) {
    line.drop(owner, entry);
    return undefined;
  }
  if (place.kind === 'ahead') {
    if (place.predecessor !== undefined) line.watchAhead(owner, entry, place.predecessor);
    return { acquired: false };
  }
  let token: bigint | undefined;
  if (place.kind === 'handed') {
    token = place.token;
  } else {
    token = await line.record(owner, entry);
    // Released while the write was out: the release deleted the entry, after the write or before it.
    if (!line.current(owner, entry)) return undefined;
    if (token === undefined || line.lost(entry)) {
      line.drop(owner, entry);
      return undefined;
    }
  }
  return line.grant(owner, entry, token, place.grant);
}
