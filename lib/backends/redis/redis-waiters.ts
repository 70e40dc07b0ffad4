import { HandOffWaiters } from '../hand-off-waiters.js';

/**
 * This process's queued owners on one Redis backend (see HandOffWaiters). A release re-assigns a
 * contended key to the head waiter for a short reservation and publishes "<owner> <reservation
 * ms>" on the wake channel (see redis.scripts.ts).
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
   * A wake-up message, "<owner> <reservation ms>". The channel is shared by every process: only
   * our own waiters' hand-offs are remembered. A message without a length (an older version
   * released) still wakes the waiter, whose next queue request claims the key.
   */
  onMessage(message: string): void {
    const length = / (\d+)$/.exec(message);
    this.handedOff(length ? message.slice(0, length.index) : message, length ? Number(length[1]) : 0);
  }
}
