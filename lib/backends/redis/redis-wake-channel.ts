import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { withTimeout } from '../backend-call.util.js';
import type { AcquireResult } from '../lock-backend.interface.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { quit, unref, type RedisOutageLog } from './redis-connection.util.js';
import type { RedisWaiters } from './redis-waiters.js';

/** A wake-channel message that ends a lease: `!lost <owner>` (owner ids never start with `!`). */
const LOST = '!lost ';

export interface RedisWakeChannelConfig {
  readonly name: string;
  readonly client: RedisClientLike;
  readonly channel: string;
  /** The bound on opening it: a connection and the SUBSCRIBE's answer. */
  readonly timeoutMs: number;
  readonly outages: RedisOutageLog;
  readonly waiters: RedisWaiters;
  /** A forced release ended `owner`'s hold (`!lost <owner>`). */
  readonly forced: (owner: string) => void;
  /** The owner the server has for `key` now. */
  readonly holderOf: (key: string) => Promise<unknown>;
  readonly closed: () => boolean;
}

/**
 * The one connection of a Redis backend that listens: hand-offs to its waiters and forced
 * releases of its holders. Opened on the first wait or grant (a dedicated duplicate of the client:
 * we own and close it).
 */
export class RedisWakeChannel {
  private subscriber?: RedisClientLike;
  private subscribing?: Promise<void>;
  /** The channel's SUBSCRIBE was answered once (a holder's grant no longer waits for it). */
  subscribed = false;

  constructor(private readonly config: RedisWakeChannelConfig) {}

  /** undefined once the wake channel is subscribed, else the wait for it (its failure handled by whoever awaits it). */
  listening(): Promise<void> | undefined {
    if (this.subscribed) return undefined;
    const listening = this.subscribe();
    listening.catch(() => undefined);
    return listening;
  }

  /**
   * A queue place taken before the wake channel was subscribed: a hand-off published meanwhile was
   * heard by nobody, so once we listen the owner looks again at once (the engine's next acquire
   * claims a reservation made to it). No channel: the place is given back now — not left to block
   * the line for its entry's life — and the wait fails.
   */
  async heardOnce(listening: Promise<void>, key: string, owner: string, giveBack: (key: string, owner: string) => Promise<unknown>): Promise<void> {
    const { waiters, name } = this.config;
    try {
      await listening;
    } catch (error) {
      // The give-back first: it names the owner's queue entry, which forgetting the owner drops.
      await giveBack(key, owner).catch(() => undefined);
      waiters.forget(owner);
      throw error instanceof LockBackendUnavailableError ? error : new LockBackendUnavailableError(name, 'subscribe', `could not subscribe to wake-ups: ${(error as Error)?.message ?? String(error)}`, { key });
    }
    waiters.wake(owner);
  }

  /**
   * A process's first grant: pub/sub keeps nothing for a subscriber to come, so it waits for the
   * subscription, then checks the key is still its own (a forced release published before the
   * subscription was heard by nobody).
   */
  async firstGrant(key: string, owner: string): Promise<AcquireResult> {
    try {
      await this.subscribe();
    } catch {
      return { acquired: true }; // no wake channel: the grant stands, the holder learns later
    }
    return (await this.config.holderOf(key)) === owner ? { acquired: true } : { acquired: false };
  }

  subscribe(): Promise<void> {
    const { client, channel, waiters } = this.config;
    this.subscribing ??= (async () => {
      // ioredis re-subscribes by itself after a reconnect, with a command nobody awaits: closed
      // before its answer, it rejects unhandled and the process crashes. We re-subscribe ourselves.
      const subscriber = client.duplicate({ autoResubscribe: false });
      subscriber.on('error', () => undefined);
      this.config.outages.watch(subscriber, false);
      subscriber.on('connect', () => unref(subscriber));
      let subscribed = false;
      subscriber.on('ready', () => {
        if (subscribed) subscriber.subscribe(channel).catch(() => undefined);
      });
      subscriber.on('message', (from: string, message: string) => {
        if (from !== channel) return;
        if (!message.startsWith(LOST)) waiters.onMessage(message);
        else this.config.forced(message.slice(LOST.length));
      });
      this.subscriber = subscriber;
      if (this.config.closed()) await quit(subscriber);
      await subscriber.subscribe(channel);
      subscribed = true;
      this.subscribed = true;
    })().catch((error: unknown) => {
      const subscriber = this.subscriber;
      this.subscriber = undefined;
      this.subscribing = undefined;
      if (subscriber) subscriber.disconnect();
      throw error;
    });
    return withTimeout(this.subscribing, this.config.timeoutMs, () =>
      new LockBackendUnavailableError(this.config.name, 'subscribe', 'could not subscribe to wake-ups in time'),
    );
  }

  /** Never keeps the process alive (see RedisBackend.holdProcess). */
  unref(): void {
    if (this.subscriber) unref(this.subscriber);
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    if (subscriber) await quit(subscriber);
  }
}
