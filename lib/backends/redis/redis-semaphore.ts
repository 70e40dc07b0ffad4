import type { AcquireRequest, AcquireResult } from '../lock-backend.interface.js';
import { permitsMismatch } from '../semaphore.util.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.util.js';
import type { RedisWakeChannel } from './redis-wake-channel.js';
import { SEMAPHORE_ACQUIRE, SEMAPHORE_EXTEND, SEMAPHORE_RELEASE } from './redis-semaphore.scripts.js';
import type { RedisWaiters } from './redis-waiters.js';

/** The parts of a Redis backend its semaphores run on: its keys, client calls, wake channel and waiters. */
export interface RedisSemaphoreParts {
  readonly channel: string;
  /** How long a queue entry lives without a refresh (3 heartbeats). */
  readonly entryLifeMs: number;
  readonly waiters: RedisWaiters;
  /** The six keys of a key (`all()`, see redis-semaphore.scripts.ts). */
  readonly keys: RedisKeys;
  /**
   * `listening()`: a holder must be listening before its grant (a forced release publishes its
   * loss once, for whoever listens); `heardOnce()`: a queue place taken before that, looked at again.
   */
  readonly wake: RedisWakeChannel;
  /** Bounded calls; a `cleanup` gives `owner`'s attempt back through its `release` if its outcome is unknown. */
  readonly commands: RedisCommands;
}

const GRANTED: AcquireResult = Object.freeze({ acquired: true });

/**
 * A Redis backend's semaphores (requests with `permits` ≥ 2): one Lua script per operation over a
 * set of holders at the lock key itself (each with its own expiry), a FIFO queue beside it, and
 * wake-ups on the backend's channel. Loss (a forced release) is told through the backend's own
 * listeners: its subscriber hears "!lost <owner>" for every holder.
 */
export class RedisSemaphores {
  /** Acquisitions in flight by owner: a release of the same owner goes out after them, never before. */
  private readonly sending = new Map<string, Promise<unknown>>();

  constructor(private readonly host: RedisSemaphoreParts) {}

  /** Owners with an acquisition in flight (see LockBackend.bookkeeping). */
  sendingOwners(): string[] {
    return [...this.sending.keys()];
  }

  acquire(request: AcquireRequest): Promise<AcquireResult> {
    const attempt = this.attempt(request);
    const { owner } = request;
    this.sending.set(owner, attempt);
    const done = (): void => {
      if (this.sending.get(owner) === attempt) this.sending.delete(owner);
    };
    attempt.then(done, done);
    return attempt;
  }

  private async attempt({ key, owner, ttlMs, queue, permits = 1 }: AcquireRequest): Promise<AcquireResult> {
    const { host } = this;
    if (queue) host.waiters.joining(owner);
    // Not waited for before the request (a process's first waiter keeps its place in line): a
    // grant made before we listen is checked once we do, a queue place looks again.
    const listening = host.wake.listening();
    let reply: [number, number?];
    try {
      reply = (await host.commands.call(
        'acquire',
        key,
        () => host.commands.script(SEMAPHORE_ACQUIRE, host.keys.all(key), [owner, ttlMs, permits, host.entryLifeMs, queue ? '1' : '0']),
        { owner, ttlMs, release: (k, o) => this.release(k, o) },
      )) as [number, number?];
    } catch (error) {
      host.waiters.forget(owner);
      throw error;
    }
    if (reply[0] === 1) {
      host.waiters.forget(owner);
      return listening ? this.listenedGrant(key, owner, ttlMs, listening) : GRANTED;
    }
    if (reply[0] === -1) {
      host.waiters.forget(owner);
      throw permitsMismatch(key, Number(reply[1]), permits);
    }
    const soonestMs = Number(reply[1] ?? -1);
    if (queue) {
      host.waiters.queued(key, owner, soonestMs);
      if (listening) await host.wake.heardOnce(listening, key, owner, (k, o) => this.leave(k, o));
    }
    return { acquired: false, holderRemainingMs: soonestMs >= 0 ? soonestMs : undefined };
  }

  /**
   * A grant made before the wake channel was subscribed: a forced release published meanwhile was
   * heard by nobody, so once we listen the hold is asked for again (owner-checked). No channel: the
   * grant stands, and its holder learns of a loss at its next renewal or its validity's end.
   */
  private async listenedGrant(key: string, owner: string, ttlMs: number, listening: Promise<void>): Promise<AcquireResult> {
    try {
      await listening;
    } catch {
      return GRANTED;
    }
    return (await this.extend(key, owner, ttlMs)) ? GRANTED : { acquired: false };
  }

  /** release() without waiting for the acquisition in flight (it is the caller). */
  private leave(key: string, owner: string): Promise<unknown> {
    const { host } = this;
    return host.commands.call('release', key, () => host.commands.script(SEMAPHORE_RELEASE, host.keys.all(key), [owner, host.channel]));
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const { host } = this;
    return (await host.commands.call('extend', key, () => host.commands.script(SEMAPHORE_EXTEND, host.keys.all(key), [owner, ttlMs]))) === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    const { host } = this;
    host.waiters.forget(owner);
    // An engine that stopped waiting for an answer releases at once: the acquisition may not even
    // have been answered yet. Sent after it, the release undoes it.
    const pending = this.sending.get(owner);
    if (pending) await pending.catch(() => undefined);
    return (await host.commands.call('release', key, () => host.commands.script(SEMAPHORE_RELEASE, host.keys.all(key), [owner, host.channel]))) === 1;
  }
}
