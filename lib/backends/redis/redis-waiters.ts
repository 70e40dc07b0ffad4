import { HandOffWaiters } from '../hand-off-waiters.js';
import type { AcquireResult } from '../lock-backend.interface.js';
import type { RedisCommands } from './redis-commands.js';
import { EXTEND } from './redis.scripts.js';

/**
 * This process's queued owners on one Redis backend (see HandOffWaiters). A release gives a
 * contended key to the head waiter with the ttl it asked for and publishes "<owner> <ttl ms>" on
 * the wake channel (see redis.scripts.ts).
 */
export class RedisWaiters extends HandOffWaiters {
  constructor(private readonly heartbeatMs: number) {
    super();
  }

  /** Resolve on a wake-up or after the heartbeat — right after the holder's expiry if next in line. */
  override wait(owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const holderMs = this.waiters.get(owner)?.holderMs ?? -1;
    // Next in line behind a holder that may have died: look again right after its expiry.
    const cap = holderMs >= 0 ? Math.min(this.heartbeatMs, holderMs + 1) : this.heartbeatMs;
    return super.wait(owner, Math.min(timeoutMs, cap), signal);
  }

  /**
   * Holders granted by a hand-off whose heartbeat had refreshed them while they waited: their
   * release also deletes that record (a hot key's hand-off does not spend a command on it).
   */
  private readonly refreshedHolders = new Set<string>();

  /** The queue entry the server last answered for `owner` ('' when it has none here). */
  entryOf(owner: string): string {
    return this.waiters.get(owner)?.entry ?? '';
  }

  /**
   * What a refresh of `owner`'s place sends: whether to look for its entry (its first refresh, or
   * so long since its last answer — more than half an entry's life — that the entry may have
   * lapsed and been dropped), and whether it has a refresh record (see REQUEUE).
   */
  refreshFlags(owner: string, entryLifeMs: number): [verify: '0' | '1', refreshed: '0' | '1'] {
    const waiter = this.waiters.get(owner);
    const refreshed = waiter?.refreshed === true;
    const stale = waiter?.queuedAt === undefined || performance.now() - waiter.queuedAt > entryLifeMs / 2;
    return [!refreshed || stale ? '1' : '0', refreshed ? '1' : '0'];
  }

  /** Remember `owner`'s queue entry (it names the entry when it refreshes or leaves); `refreshed`: a refresh answered it. */
  setEntry(owner: string, entry: string, refreshed: boolean): void {
    const waiter = this.waiters.get(owner);
    if (!waiter) return;
    // A refresh that kept the entry keeps a record of it on the server; one that added it anew deleted it.
    waiter.refreshed = refreshed && waiter.entry === entry;
    waiter.entry = entry;
  }

  /** `owner` is granted by a hand-off: keep whether its release must delete its refresh record. */
  granted(owner: string): void {
    if (this.waiters.get(owner)?.refreshed) this.refreshedHolders.add(owner);
  }

  /** Whether `owner`'s release deletes a refresh record (a waiter leaving always does). */
  releasing(owner: string): boolean {
    // (Nothing to look up on the common release: no holder refreshed, no waiter leaving.)
    if (this.refreshedHolders.size > 0 && this.refreshedHolders.delete(owner)) return true;
    return this.waiters.size > 0 && this.waiters.get(owner)?.refreshed === true;
  }

  /** The holders whose release deletes a refresh record (see LockBackend.bookkeeping). */
  holdersRefreshed(): string[] {
    return [...this.refreshedHolders];
  }

  /**
   * A wake-up message, "<owner> <ms the key was set for>". The channel is shared by every process:
   * only our own waiters' hand-offs are remembered. A message without a length still wakes the
   * waiter, whose next queue request claims the key.
   */
  onMessage(message: string): void {
    const length = / (\d+)$/.exec(message);
    this.handedOff(length ? message.slice(0, length.index) : message, length ? Number(length[1]) : 0);
  }
}

/**
 * The release that woke `owner` gave it the key (and took it out of the queue): start at once. Its
 * validity counts from its first queue request, which the hand-off followed. Set for its own ttl:
 * final. For a shorter reservation, or after a long wait: its full ttl is claimed at once (an
 * owner-checked `PEXPIRE` of `lock`) and counts from the claim's send. undefined: too little is
 * left; ask the server.
 */
export function takeHandOff(
  waiters: RedisWaiters,
  commands: RedisCommands,
  lock: string,
  key: string,
  owner: string,
  ttlMs: number,
  validityMs: number,
): AcquireResult | undefined {
  const handOff = waiters.handOff(owner, validityMs);
  if (!handOff) return undefined;
  const { validFrom, validForMs } = handOff;
  // Set for its own ttl at the hand-off: final, unless the wait spent more than a tenth of the
  // validity (which counts from its first queue request) — a lease starts with 90 % of its ttl.
  const sentAt = performance.now();
  const final = handOff.reservedMs >= ttlMs && sentAt - validFrom <= validityMs / 10;
  // Else the claim is written now, before the holder's work starts: a start that keeps the event
  // loop busy (CPU-bound work, a long GC pause) must not outlive a reservation on the server. A
  // client that holds writes back by itself (ioredis' auto-pipelining) would send it only after
  // that work: the server is asked first instead (the owner's queue request claims).
  if (!final && commands.holdsWrites) return undefined;
  waiters.granted(owner);
  waiters.forget(owner);
  if (final) return { acquired: true, provisional: { validFrom, validForMs } };
  // By its text (EVAL), not its SHA: after a restart or failover the server may not know the SHA,
  // and the text sent again after a NOSCRIPT answer would wait for that work too.
  const confirmed = commands.call('acquire', key, () => commands.evalNow(EXTEND, [lock], [owner, ttlMs])).then((reply) => {
    if (reply === 1) return sentAt;
    waiters.releasing(owner); // not its key: the engine forgets the lease without a release
    return undefined;
  });
  commands.flush();
  confirmed.catch(() => undefined); // a failed claim leaves the reservation to run out
  return { acquired: true, provisional: { validFrom, validForMs, confirmed } };
}
