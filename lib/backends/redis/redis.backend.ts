import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { AcquireRequest, AcquireResult, LockBackend } from '../lock-backend.interface.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { errorText } from '../../common/redact.util.js';
import { REDIS_CAPABILITIES, REDIS_DEFAULTS } from './redis-backend.options.js';
import { checkRedisKeyPrefix, redisHashTag } from './redis-keys.util.js';
import { boundedCall, withTimeout, type Unavailable } from '../backend-call.util.js';
import { TurnWaiters } from '../wait-turn.util.js';
import { runScript, type RedisScript } from './redis-script.loader.js';
import { ENQUEUE, EXTEND, RELEASE } from './redis.scripts.js';

export interface RedisBackendConfig {
  /** ioredis `Redis` or `Cluster`. */
  client: RedisClientLike;
  /** Close the client in `close()` (true only when the module created it). */
  ownsClient: boolean;
  keyPrefix?: string;
  connectTimeoutMs?: number;
  commandTimeoutMs?: number;
  /**
   * A waiter re-checks at least this often even without a wake-up: it refreshes its queue entry
   * and covers a lost pub/sub message. Entries and the hand-off reservations this process makes
   * last 3× this. Processes may differ: a woken waiter trusts the reservation for the length the
   * releasing process set (the wake-up message carries it), never for its own. @default 500
   */
  waiterHeartbeatMs?: number;
  name?: string;
  /** Where connection outages of the clients this backend owns are reported (once per outage). */
  log?: { warn(message: string): void; log(message: string): void };
}

/**
 * `efficiency` locks on one Redis (standalone, Sentinel or Cluster client). Acquire is one
 * `SET key owner NX PX ttl`; release, extend and queueing are compare-and-act Lua scripts.
 * No fencing tokens: a failover or restart without persistence can lose the key.
 */
export class RedisBackend implements LockBackend {
  readonly capabilities = REDIS_CAPABILITIES;
  readonly name: string;
  private readonly client: RedisClientLike;
  private readonly prefix: string;
  private readonly channel: string;
  private readonly connectTimeoutMs: number;
  private readonly commandTimeoutMs: number;
  private readonly heartbeatMs: number;
  private readonly entryLifeMs: number;
  private readonly turns = new TurnWaiters();
  /** Per queued owner: ms until the holder's expiry, when we are next in line. */
  private readonly headWait = new Map<string, number>();
  /**
   * Per queued owner: when its first queue request was sent (performance.now()). Every hand-off
   * to it happens after that request reached Redis, so its validity may count from there.
   */
  private readonly enqueuedAt = new Map<string, number>();
  /**
   * Queued owners whose hand-off message arrived (the key is reserved for them), with the
   * reservation's length as the releasing process set it (its PX), which the message carries.
   */
  private readonly handedOff = new Map<string, number>();
  /** Keys seen busy recently, oldest first (insertion order), at most 1,000. */
  private readonly busyAt = new Map<string, number>();
  private subscriber?: RedisClientLike;
  private subscribing?: Promise<void>;
  private connected?: Promise<void>;
  private closed = false;
  /** An outage is logged once, when the first error of it arrives, and once more when it ends. */
  private down = false;

  constructor(private readonly config: RedisBackendConfig) {
    this.client = config.client;
    this.name = config.name ?? 'redis';
    // The application's own client reports its errors to the application; ours to our log.
    if (config.ownsClient) {
      this.logConnection(this.client, true);
      this.client.on('connect', () => unref(this.client));
    }
    this.prefix = checkRedisKeyPrefix(config.keyPrefix ?? REDIS_DEFAULTS.keyPrefix, config.client.isCluster === true, `new RedisBackend("${this.name}")`, 'keyPrefix');
    this.channel = `${this.prefix}__wake`;
    this.connectTimeoutMs = config.connectTimeoutMs ?? REDIS_DEFAULTS.connectTimeoutMs;
    this.commandTimeoutMs = config.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs;
    this.heartbeatMs = config.waiterHeartbeatMs ?? REDIS_DEFAULTS.waiterHeartbeatMs;
    this.entryLifeMs = this.heartbeatMs * 3;
  }

  /**
   * The three keys of one lock: `lock:{key}`, `lock:{key}:q`, `lock:{key}:qa`. The user key sits
   * inside one `{…}` hash tag, so all three share a Cluster slot. Cluster hashes what lies between
   * the first `{` and the first `}` after it, or the whole name when that is empty: a key starting
   * with `}` (`}a` → `lock:{}a}`) would leave the tag empty and scatter its three keys over three
   * slots (CROSSSLOT). Such keys, and only they, use `lock:%{…}` with `%` and `}` percent-encoded
   * inside the tag: never empty, never a `}`, and never equal to a plain layout (which has `{`
   * right after the prefix), so distinct keys stay distinct.
   */
  keysOf(key: string): [lock: string, queue: string, alive: string] {
    let lock = `${this.prefix}{${key}}`;
    if (redisHashTag(lock) === undefined) lock = `${this.prefix}%{${key.replaceAll('%', '%25').replaceAll('}', '%7D')}}`;
    return [lock, `${lock}:q`, `${lock}:qa`];
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const { key, owner, ttlMs, queue, reportHolder } = request;
    const keys = this.keysOf(key);
    if (queue && this.handedOff.has(owner)) {
      // The engine trusts a grant for its ttl only: with a lock-delay it asks the server to keep
      // the key longer (ttlMs = ttl + lockDelay) than it will trust it (validityMs = ttl).
      const validityMs = Math.min(ttlMs, request.validityMs ?? ttlMs);
      const granted = this.takeHandOff(key, owner, ttlMs, validityMs);
      if (granted) return granted;
    }
    // A key that was busy a moment ago is likely busy again: queue at once (one round trip)
    // instead of a SET NX that fails first. The queue script takes the key itself when free.
    const busyAt = queue ? this.busyAt.get(key) : undefined;
    const recentlyBusy = busyAt !== undefined && performance.now() - busyAt < 1_000;
    if (!recentlyBusy && (!queue || !this.headWait.has(owner))) {
      const reply = await this.call('acquire', key, () => this.client.set(keys[0], owner, 'PX', ttlMs, 'NX'), owner);
      if (reply === 'OK') return { acquired: true };
      if (!queue) {
        // Busy without queueing: say when the holder's lease ends (Retry-After) only to a caller
        // that will report it — a skipped @Cron tick must not pay a second round trip.
        if (!reportHolder) return { acquired: false };
        const pttl = Number(await this.call('acquire', key, () => this.client.pttl(keys[0])));
        return { acquired: false, holderRemainingMs: pttl >= 0 ? pttl : undefined };
      }
    }
    this.turns.track(owner);
    this.headWait.set(owner, -1);
    try {
      await this.subscribe();
    } catch (error) {
      this.forget(owner);
      throw error;
    }
    if (!this.enqueuedAt.has(owner)) this.enqueuedAt.set(owner, performance.now());
    let reply: [number, number?];
    try {
      reply = (await this.call(
        'acquire',
        key,
        () => this.script(ENQUEUE, keys, [owner, ttlMs, this.entryLifeMs, this.channel]),
        owner,
      )) as [number, number?];
    } catch (error) {
      // Not queued as far as we know (no connection, no answer): forget the owner here; a request
      // that did reach Redis is undone by call()'s clean-up, and its queue entry expires anyway.
      this.forget(owner);
      throw error;
    }
    if (reply[0] === 1) {
      this.forget(owner);
      return { acquired: true };
    }
    const holderMs = reply[1] ?? -1;
    this.headWait.set(owner, holderMs);
    this.noteBusy(key);
    return { acquired: false, holderRemainingMs: holderMs >= 0 ? holderMs : undefined };
  }

  /**
   * The release that woke us reserved the key for us and took us out of the queue: start at once
   * on that reservation, valid from our first queue request (which reached Redis before any
   * hand-off to us), and claim the full ttl in the background — one round trip less per hand-off.
   * The reservation lasts what the *releasing* process set (its entry lifetime, carried in the
   * message), which may differ from ours: trusting our own would outlive the key on the server.
   * Too long a wait leaves too little of it, or of the ttl the engine trusts: claim first then.
   */
  private takeHandOff(key: string, owner: string, ttlMs: number, validityMs: number): AcquireResult | undefined {
    const from = this.enqueuedAt.get(owner);
    const reservedMs = this.handedOff.get(owner) ?? 0;
    const validForMs = Math.min(validityMs, reservedMs);
    if (from === undefined || !(validForMs > 0) || performance.now() - from > validForMs / 2) return undefined;
    this.forget(owner);
    const sentAt = performance.now();
    const confirmed = this.call('acquire', key, () => this.script(EXTEND, [this.keysOf(key)[0]], [owner, ttlMs])).then((reply) =>
      reply === 1 ? sentAt : undefined,
    );
    confirmed.catch(() => undefined); // a failed claim leaves the reservation to run out
    return { acquired: true, provisional: { validFrom: from, validForMs, confirmed } };
  }

  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const holderMs = this.headWait.get(owner) ?? -1;
    // Next in line behind a holder that may have died: look again right after its expiry.
    const cap = holderMs >= 0 ? Math.min(this.heartbeatMs, holderMs + 1) : this.heartbeatMs;
    return this.turns.wait(owner, Math.min(timeoutMs, cap), signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const reply = await this.call('extend', key, () => this.script(EXTEND, [this.keysOf(key)[0]], [owner, ttlMs]));
    return reply === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    this.forget(owner);
    const reply = await this.call('release', key, () =>
      this.script(RELEASE, this.keysOf(key), [owner, this.entryLifeMs, this.channel]),
    );
    return reply === 1;
  }

  /** `PING` within `timeoutMs`, counting the wait for a connection. */
  async ping(timeoutMs: number): Promise<void> {
    const reply = await boundedCall({
      backend: this.name,
      operation: 'ping',
      closed: this.closed,
      // The wait for a connection counts against timeoutMs here.
      send: (unavailable) => this.ready(unavailable).then(() => this.client.ping()),
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms (client status ${this.client.status})`,
    });
    if (reply !== 'PONG') throw new LockBackendUnavailableError(this.name, 'ping', `unexpected reply to PING: ${String(reply)}`);
  }

  async close(): Promise<void> {
    this.closed = true;
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    if (subscriber) await quit(subscriber);
    if (this.config.ownsClient) await quit(this.client);
  }

  /**
   * Connection errors of the clients this backend owns go to its log once per outage (ioredis
   * emits one per reconnect attempt), and their recovery once: `ready` of the main client.
   */
  private logConnection(client: RedisClientLike, main: boolean): void {
    const log = this.config.log;
    client.on('error', (error: unknown) => {
      if (this.down || this.closed) return;
      this.down = true;
      log?.warn(
        `Redis connection of lock backend "${this.name}" failed: ${errorText(error)}; ` +
          'reconnecting (locks fail fast with LockBackendUnavailableError meanwhile; further errors of this outage are not logged)',
      );
    });
    if (main) {
      client.on('ready', () => {
        if (!this.down) return;
        this.down = false;
        log?.log(`Redis connection of lock backend "${this.name}" restored`);
      });
    }
  }

  /**
   * Our own connections (not the application's client) never keep the process alive, whatever the
   * engine asks (`hold` is ignored): every command in flight, every wait for a connection and every
   * wait for a turn runs on a timer of its own that does. An idle connection that held the process
   * kept an application alive whose `listen()` failed after bootstrap (no shutdown hook runs then),
   * as it did one whose bootstrap failed.
   */
  holdProcess(_hold: boolean): void {
    if (this.config.ownsClient) unref(this.client);
    if (this.subscriber) unref(this.subscriber);
  }

  /** Remember (boundedly) which keys were contended recently. */
  private noteBusy(key: string): void {
    this.busyAt.delete(key);
    this.busyAt.set(key, performance.now());
    if (this.busyAt.size > 1_000) this.busyAt.delete(this.busyAt.keys().next().value!);
  }

  private forget(owner: string): void {
    this.headWait.delete(owner);
    this.enqueuedAt.delete(owner);
    this.handedOff.delete(owner);
    this.turns.forget(owner);
  }

  /** One connection for wake-ups, opened on the first wait (a dedicated duplicate: we own and close it). */
  private subscribe(): Promise<void> {
    this.subscribing ??= (async () => {
      const subscriber = this.client.duplicate();
      subscriber.on('error', () => undefined);
      this.logConnection(subscriber, false);
      subscriber.on('connect', () => unref(subscriber));
      subscriber.on('message', (channel: string, message: string) => {
        if (channel !== this.channel) return;
        // "<owner> <reservation ms>". The channel is shared by every process: remember only our
        // own waiters' hand-offs. A message without a length (an older version released) still
        // wakes the waiter, whose next queue request claims the key.
        const length = / (\d+)$/.exec(message);
        const owner = length ? message.slice(0, length.index) : message;
        const reservedMs = length ? Number(length[1]) : 0;
        if (this.headWait.has(owner) && reservedMs > 0) this.handedOff.set(owner, reservedMs);
        this.turns.wake(owner);
      });
      this.subscriber = subscriber;
      if (this.closed) await quit(subscriber);
      await subscriber.subscribe(this.channel);
    })().catch((error: unknown) => {
      const subscriber = this.subscriber;
      this.subscriber = undefined;
      this.subscribing = undefined;
      if (subscriber) subscriber.disconnect();
      throw error;
    });
    return withTimeout(this.subscribing, this.connectTimeoutMs + this.commandTimeoutMs, () =>
      new LockBackendUnavailableError(this.name, 'subscribe', 'could not subscribe to wake-ups in time'),
    );
  }

  private script(script: RedisScript, keys: string[], args: (string | number)[]): Promise<unknown> {
    return runScript(this.client, script, keys, args);
  }

  /**
   * Run one command with a bounded wait for the connection and a bounded command time, so a dead
   * Redis fails fast as `LockBackendUnavailableError` instead of hanging. An acquire whose answer
   * never came may still be applied later (ioredis resends after reconnecting); `cleanupOwner`
   * queues a compare-and-delete behind it so such a late SET cannot leave a ghost lock.
   */
  private call<T>(operation: string, key: string, send: () => Promise<T>, cleanupOwner?: string): Promise<T> {
    return boundedCall({
      backend: this.name,
      operation,
      key,
      closed: this.closed,
      connected: (unavailable) => this.ready(unavailable),
      send,
      timeoutMs: this.commandTimeoutMs,
      timedOut: () => `no answer within ${this.commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: () => {
        if (cleanupOwner !== undefined) void this.release(key, cleanupOwner).catch(() => undefined);
      },
    });
  }

  private ready(unavailable: Unavailable): Promise<void> {
    const status = this.client.status;
    if (status === 'ready' || status === 'wait') return Promise.resolve();
    if (status === 'end') return Promise.reject(unavailable('the client was closed'));
    // One 'ready' listener however many calls wait for the connection (a burst, or an outage).
    this.connected ??= new Promise<void>((resolve) => {
      this.client.once('ready', () => {
        this.connected = undefined;
        resolve();
      });
    });
    return withTimeout(this.connected, this.connectTimeoutMs, () =>
      unavailable(`not connected within ${this.connectTimeoutMs} ms (connectTimeoutMs; status ${this.client.status})`),
    );
  }
}

/** Let the process exit whatever this connection does (ioredis makes a new socket per reconnect). */
function unref(client: RedisClientLike): void {
  (client as { stream?: { unref?(): void } }).stream?.unref?.();
}

async function quit(client: RedisClientLike): Promise<void> {
  try {
    if (client.status === 'end') return;
    if (client.status !== 'ready') {
      client.disconnect();
      return;
    }
    await withTimeout(client.quit(), 1000, () => new Error('quit timed out'));
  } catch {
    client.disconnect();
  }
}
