import { BusyKeys } from './busy-keys.js';
import { TurnWaiters } from './wait-turn.util.js';

/** What this process knows of one of its queued owners. */
interface QueuedOwner {
  /** ms until the holder's expiry when the owner is next in line, else -1; set while it is queued. */
  holderMs: number;
  /**
   * When its first queue request was sent (performance.now()). Every hand-off to it happens after
   * that request reached the server, so its validity may count from there.
   */
  enqueuedAt: number;
  /** When its latest queue request was sent. */
  sentAt: number;
  /**
   * When the latest queue request answered "still queued" was sent. A hand-off to the owner after
   * that answer happened after the request reached the server: its validity may count from here.
   */
  queuedAt: number;
  /**
   * What that answer said of tokens: every token issued before it is at most this. A hand-off whose
   * token is not above it was made before the answer — and has ended since, or the request would
   * have claimed it: stale.
   */
  tokenBound: bigint;
  /**
   * Set when its hand-off message arrived (the key is reserved for it): the reservation's length
   * as the releasing process set it, which the message carries.
   */
  reservedMs: number;
  /** The reservation's fencing token, when the backend issues tokens and the message carries it. */
  token: bigint;
  /** The backend's own name for its queue entry, when the server gives one (Redis: its list entry). */
  entry: string;
  /** The server keeps a liveness record for it beside its entry (Redis: its heartbeat refreshed it). */
  refreshed: boolean;
}

/** A reservation a queued owner may start on before claiming it: see `HandOffWaiters.handOff`. */
export interface HandOff {
  readonly validFrom: number;
  readonly validForMs: number;
  /** How long the server keeps the key from the hand-off on, as the releasing process set it. */
  readonly reservedMs: number;
  readonly token?: bigint;
}

/**
 * A backend's queued owners in this process — where each stands in line, the hand-offs announced
 * to it — and the keys seen busy lately. Bookkeeping only; the backend does the I/O.
 *
 * Fairness without polling (Redis, PostgreSQL): a release reserves a contended key for the head
 * waiter for a short while and announces it on a channel every process hears. The waiter may
 * start on the reservation at once and claim its full ttl in the background.
 */
export class HandOffWaiters extends TurnWaiters<QueuedOwner> {
  /** Keys seen busy recently. */
  private readonly busyKeys = new BusyKeys();

  /** The keys seen busy lately (a per-key cache: see LockBackend.bookkeeping). */
  busyKeyCache(): string[] {
    return this.busyKeys.keys();
  }

  /** Start tracking `owner` before its queue request, so no wake-up is missed. */
  joining(owner: string): void {
    this.entry(owner).holderMs = -1;
  }

  /** Its queue request is being sent: the first such time bounds every hand-off to it. */
  sending(owner: string): void {
    const entry = this.entry(owner);
    entry.sentAt = performance.now();
    entry.enqueuedAt ??= entry.sentAt;
  }

  isQueued(owner: string): boolean {
    return this.waiters.get(owner)?.holderMs !== undefined;
  }

  /**
   * Still queued after a queue request: `holderMs` until the holder's expiry if next, else -1;
   * `tokenBound`, if the server reports one, bounds every token issued before its answer.
   */
  queued(key: string, owner: string, holderMs: number, tokenBound?: bigint): void {
    const entry = this.entry(owner);
    entry.holderMs = holderMs;
    entry.queuedAt = entry.sentAt;
    entry.tokenBound = tokenBound;
    this.busy(key);
  }

  /** Remember that `key` was busy just now. */
  busy(key: string): void {
    this.busyKeys.busy(key);
  }

  /** `key` was found free with nobody waiting: the next try assumes a free key again. */
  free(key: string): void {
    this.busyKeys.free(key);
  }

  hasHandOff(owner: string): boolean {
    return this.waiters.get(owner)?.reservedMs !== undefined;
  }

  /**
   * The reservation handed to `owner`, if enough of it is left to start on: valid from its first
   * queue request for the shorter of `validityMs` and the reservation the *releasing* process set
   * (trusting our own length would outlive the key on the server). Too long a wait leaves too
   * little of it: undefined then, and the caller claims the key first.
   *
   * `since: 'answer'` (for a server whose queue request claims a live hand-off made to its owner
   * and bounds the tokens issued before its answer): valid from the latest "still queued"
   * answer's request instead — shorter waits, longer validity — for a hand-off whose token is
   * above that answer's bound. Any other (no bound, no token, or not above it: a grant made
   * before the answer, ended since) is dropped: undefined, and the caller asks the server.
   */
  handOff(owner: string, validityMs: number, since: 'first-request' | 'answer' = 'first-request'): HandOff | undefined {
    const waiter = this.waiters.get(owner);
    if (!waiter) return undefined;
    const { reservedMs = 0, token, tokenBound } = waiter;
    const validFrom = since === 'answer' ? waiter.queuedAt : waiter.enqueuedAt;
    if (since === 'answer' && (token === undefined || tokenBound === undefined || token <= tokenBound)) {
      waiter.reservedMs = undefined;
      waiter.token = undefined;
      return undefined;
    }
    const validForMs = Math.min(validityMs, reservedMs);
    if (validFrom === undefined || !(validForMs > 0) || performance.now() - validFrom > validForMs / 2) return undefined;
    return { validFrom, validForMs, reservedMs, token };
  }

  /** A key that was busy a moment ago is likely busy again. */
  recentlyBusy(key: string): boolean {
    return this.busyKeys.recentlyBusy(key);
  }

  /**
   * A hand-off message for `owner`: a reservation of `reservedMs` (0: unknown, an older version
   * released; the waiter is still woken, and its next queue request claims the key), with its
   * token if the backend has one. Only our own queued owners' hand-offs are remembered.
   */
  handedOff(owner: string, reservedMs: number, token?: bigint): void {
    if (this.isQueued(owner) && reservedMs > 0) {
      const waiter = this.waiters.get(owner)!;
      waiter.reservedMs = reservedMs;
      if (token !== undefined) waiter.token = token;
    }
    this.wake(owner);
  }

  /**
   * A forced release ended `owner`'s hold — possibly a hand-off made to it that it has not started
   * on yet: that reservation is gone (the key went on to the next waiter), so it must never be
   * started on. The owner asks the server again.
   */
  revokeHandOff(owner: string): void {
    const waiter = this.waiters.get(owner);
    if (waiter?.reservedMs === undefined) return;
    waiter.reservedMs = undefined;
    waiter.token = undefined;
    this.wake(owner);
  }

  protected entry(owner: string): NonNullable<ReturnType<typeof this.waiters.get>> {
    this.track(owner);
    return this.waiters.get(owner)!;
  }
}
