import { TurnWaiters } from '../wait-turn.util.js';

/** What this process knows of one of its queued owners. */
interface QueuedOwner {
  /** ms until the holder's expiry when the owner is next in line, else -1; set while it is queued. */
  holderMs: number;
  /**
   * When its first queue request was sent (performance.now()). Every hand-off to it happens after
   * that request reached Redis, so its validity may count from there.
   */
  enqueuedAt: number;
  /**
   * Set when its hand-off message arrived (the key is reserved for it): the reservation's length
   * as the releasing process set it (its PX), which the message carries.
   */
  reservedMs: number;
}

/**
 * This process's queued owners on one Redis backend — where each stands in line, the hand-offs
 * announced to it — and the keys seen busy lately. Bookkeeping only; the backend does the I/O.
 *
 * Fairness without polling (see redis.scripts.ts): a release re-assigns a contended key to the
 * head waiter for a short reservation and publishes "<owner> <reservation ms>" on the wake channel.
 */
export class RedisWaiters extends TurnWaiters<QueuedOwner> {
  /** Keys seen busy recently, oldest first (insertion order), at most 1,000. */
  private readonly busyAt = new Map<string, number>();

  constructor(private readonly heartbeatMs: number) {
    super();
  }

  /** Start tracking `owner` before its queue request, so no wake-up is missed. */
  joining(owner: string): void {
    this.entry(owner).holderMs = -1;
  }

  /** Its queue request is being sent: the first such time bounds every hand-off to it. */
  sending(owner: string): void {
    this.entry(owner).enqueuedAt ??= performance.now();
  }

  isQueued(owner: string): boolean {
    return this.waiters.get(owner)?.holderMs !== undefined;
  }

  /** Still queued after a queue request: `holderMs` until the holder's expiry if next, else -1. */
  queued(key: string, owner: string, holderMs: number): void {
    this.entry(owner).holderMs = holderMs;
    this.busyAt.delete(key);
    this.busyAt.set(key, performance.now());
    if (this.busyAt.size > 1_000) this.busyAt.delete(this.busyAt.keys().next().value!);
  }

  hasHandOff(owner: string): boolean {
    return this.waiters.get(owner)?.reservedMs !== undefined;
  }

  /**
   * The reservation handed to `owner`, if enough of it is left to start on: valid from its first
   * queue request for the shorter of `validityMs` and the reservation the *releasing* process set
   * (trusting our own length would outlive the key on the server). Too long a wait leaves too
   * little of it: undefined then, and the caller claims the key first.
   */
  handOff(owner: string, validityMs: number): { validFrom: number; validForMs: number } | undefined {
    const { enqueuedAt: validFrom, reservedMs = 0 } = this.waiters.get(owner) ?? {};
    const validForMs = Math.min(validityMs, reservedMs);
    if (validFrom === undefined || !(validForMs > 0) || performance.now() - validFrom > validForMs / 2) return undefined;
    return { validFrom, validForMs };
  }

  /** A key that was busy a moment ago is likely busy again. */
  recentlyBusy(key: string): boolean {
    const at = this.busyAt.get(key);
    return at !== undefined && performance.now() - at < 1_000;
  }

  /** Resolve on a wake-up or after the heartbeat — right after the holder's expiry if next in line. */
  override wait(owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const holderMs = this.waiters.get(owner)?.holderMs ?? -1;
    // Next in line behind a holder that may have died: look again right after its expiry.
    const cap = holderMs >= 0 ? Math.min(this.heartbeatMs, holderMs + 1) : this.heartbeatMs;
    return super.wait(owner, Math.min(timeoutMs, cap), signal);
  }

  /**
   * A wake-up message, "<owner> <reservation ms>". The channel is shared by every process: only
   * our own waiters' hand-offs are remembered. A message without a length (an older version
   * released) still wakes the waiter, whose next queue request claims the key.
   */
  onMessage(message: string): void {
    const length = / (\d+)$/.exec(message);
    const owner = length ? message.slice(0, length.index) : message;
    const reservedMs = length ? Number(length[1]) : 0;
    if (this.isQueued(owner) && reservedMs > 0) this.waiters.get(owner)!.reservedMs = reservedMs;
    this.wake(owner);
  }

  private entry(owner: string): NonNullable<ReturnType<typeof this.waiters.get>> {
    this.track(owner);
    return this.waiters.get(owner)!;
  }
}
