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

  /** The queue entry the server last answered for `owner` ('' when it has none here). */
  entryOf(owner: string): string {
    return this.waiters.get(owner)?.entry ?? '';
  }

  /** Remember `owner`'s queue entry (it names the entry when it refreshes or leaves). */
  setEntry(owner: string, entry: string): void {
    const waiter = this.waiters.get(owner);
    if (waiter) waiter.entry = entry;
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
 * validity counts from its first queue request, which the hand-off followed. For its own ttl:
 * final. For a shorter reservation: the engine claims the full ttl (an owner-checked `PEXPIRE` of
 * `lock`) if the hold lasts (see LeaseClaim). undefined: too little of it is left; ask the server.
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
  waiters.forget(owner);
  const { validFrom, validForMs } = handOff;
  if (handOff.reservedMs >= ttlMs) return { acquired: true, provisional: { validFrom, validForMs } };
  const claim = (): Promise<number | undefined> => {
    const sentAt = performance.now();
    const confirmed = commands.call('acquire', key, () => commands.script(EXTEND, [lock], [owner, ttlMs])).then((reply) => (reply === 1 ? sentAt : undefined));
    confirmed.catch(() => undefined); // a failed claim leaves the reservation to run out
    return confirmed;
  };
  return { acquired: true, provisional: { validFrom, validForMs, claim } };
}
