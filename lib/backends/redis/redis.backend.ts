import { LossListeners } from '../loss-listeners.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener, HoldKind } from '../lock-backend.interface.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { checkRedisClient } from './redis-client.check.js';
import { REDIS_CAPABILITIES, REDIS_DEFAULTS, type RedisBackendConfig } from './redis-backend.options.js';
import { checkRedisKeyPrefix, layoutMismatch, RedisKeys } from './redis-keys.util.js';
import { quit, RedisOutageLog, unref } from './redis-connection.util.js';
import { RedisWaiters, takeHandOff } from './redis-waiters.js';
import { DELETE_IF_OWNER, ENQUEUE, EXTEND, RELEASE, REQUEUE } from './redis.scripts.js';
import { RedisCommands } from './redis-commands.js';
import { RedisWakeChannel } from './redis-wake-channel.js';
import { acquireAllOnRedis } from './redis-acquire-all.js';
import { RedisAdmin } from './redis-admin.js';
import { PLAIN_BUSY } from './redis-semaphore.scripts.js';
import { RedisSemaphores } from './redis-semaphore.js';
import { permitsMismatch, permitsOf } from '../semaphore.util.js';

const GRANTED: AcquireResult = Object.freeze({ acquired: true });

/**
 * `efficiency` locks on one Redis (standalone, Sentinel or Cluster client). Acquire is one
 * `SET key owner NX PX ttl`; release, extend and queueing are compare-and-act Lua scripts.
 * No fencing tokens: a failover or restart without persistence can lose the key.
 */
export class RedisBackend implements LockBackend {
  readonly capabilities = REDIS_CAPABILITIES;
  readonly name: string;
  private readonly client: RedisClientLike;
  private readonly keys: RedisKeys;
  private readonly channel: string;
  private readonly entryLifeMs: number;
  private readonly waiters: RedisWaiters;
  private closed = false;
  private readonly outages: RedisOutageLog;
  private readonly commands: RedisCommands;
  private readonly wake: RedisWakeChannel;
  private readonly lossListeners = new LossListeners();
  /** Its semaphores, from the first request with `permits` on. */
  private semaphores?: RedisSemaphores;
  /** inspect(), listKeys(), forceRelease(). */
  private readonly admin: RedisAdmin;

  constructor(private readonly config: RedisBackendConfig) {
    this.name = config.name ?? 'redis';
    this.client = checkRedisClient(config.client, 'client', `new RedisBackend("${this.name}")`);
    this.outages = new RedisOutageLog(this.name, config.log, () => this.closed);
    // The application's own client reports its errors to the application; ours to our log.
    if (config.ownsClient) {
      this.outages.watch(this.client, true);
      this.client.on('connect', () => unref(this.client));
    }
    const prefix = checkRedisKeyPrefix(config.keyPrefix ?? REDIS_DEFAULTS.keyPrefix, this.client.isCluster === true, `new RedisBackend("${this.name}")`, 'keyPrefix');
    this.keys = new RedisKeys(prefix);
    this.channel = `${prefix}__wake`;
    const connectTimeoutMs = config.connectTimeoutMs ?? REDIS_DEFAULTS.connectTimeoutMs;
    const commandTimeoutMs = config.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs;
    const heartbeatMs = config.waiterHeartbeatMs ?? REDIS_DEFAULTS.waiterHeartbeatMs;
    this.entryLifeMs = heartbeatMs * 3;
    this.waiters = new RedisWaiters(heartbeatMs);
    const closed = (): boolean => this.closed;
    this.commands = new RedisCommands({ name: this.name, client: this.client, connectTimeoutMs, commandTimeoutMs, closed, release: (k, o) => this.release(k, o) });
    this.wake = new RedisWakeChannel({
      name: this.name,
      client: this.client,
      channel: this.channel,
      timeoutMs: connectTimeoutMs + commandTimeoutMs,
      outages: this.outages,
      waiters: this.waiters,
      forced: (owner) => this.forced(owner),
      // pcall: a semaphore may have taken the key meanwhile (GET of its set is WRONGTYPE).
      holderOf: (key) => this.commands.call('acquire', key, () => this.client.eval("return redis.pcall('GET', KEYS[1])", 1, this.keys.lock(key))),
      closed,
    });
    this.admin = new RedisAdmin({
      name: this.name,
      client: this.client,
      prefix,
      channel: this.channel,
      entryLifeMs: this.entryLifeMs,
      commands: this.commands,
      keys: this.keys,
    });
  }

  /** The keys of one lock the scripts read: `lock:{key}`, its queue `lock:{key}:q2`, its waiters' refreshes (see RedisKeys). */
  keysOf(key: string): [lock: string, queue: string, refreshed: string] {
    return this.keys.plain(key);
  }

  /** keysOf() and a semaphore's three keys beside them, in the order the scripts read them. */
  allKeysOf(key: string): string[] {
    return this.keys.all(key);
  }

  /** This backend's semaphores (requests with `permits` ≥ 2): same keys, client, wake channel and loss listeners. */
  private semaphoreOf(): RedisSemaphores {
    const { channel, entryLifeMs, waiters, keys, wake, commands } = this;
    return (this.semaphores ??= new RedisSemaphores({ channel, entryLifeMs, waiters, keys, wake, commands }));
  }

  /** See LockBackend.bookkeeping. */
  bookkeeping(): Record<string, string[]> {
    const { waiters } = this;
    return { waiters: waiters.owners(), semaphoreSending: this.semaphores?.sendingOwners() ?? [], busyKeyCache: waiters.busyKeyCache(), holdersRefreshed: waiters.holdersRefreshed() };
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    if (permitsOf(request) > 1) return this.semaphoreOf().acquire(request);
    const { key, owner, ttlMs, queue, reportHolder } = request;
    if (queue && this.waiters.hasHandOff(owner)) {
      // With a lock-delay the server keeps the key (ttlMs = ttl + lockDelay) longer than it is trusted (validityMs = ttl).
      const validityMs = Math.min(ttlMs, request.validityMs ?? ttlMs);
      const granted = takeHandOff(this.waiters, this.commands, this.keys.lock(key), key, owner, ttlMs, validityMs);
      if (granted) return granted;
    }
    // A key that was busy a moment ago is likely busy again: queue at once (one round trip)
    // instead of a SET NX that fails first. The queue script takes the key itself when free.
    if (!(queue && this.waiters.recentlyBusy(key)) && (!queue || !this.waiters.isQueued(owner))) {
      const lock = this.keys.lock(key);
      const reply = await this.commands.call('acquire', key, () => this.client.set(lock, owner, 'PX', ttlMs, 'NX'), { owner, ttlMs });
      if (reply === 'OK') return this.granted(key, owner);
      if (!queue) {
        // Busy without queueing: say when the holder's lease ends (Retry-After) only to a caller that
        // will report it (a skipped @Cron tick pays no second round trip). A process that uses
        // semaphores also learns on a busy try whether the key is one (a mismatch).
        if (!reportHolder && this.semaphores === undefined) return { acquired: false };
        return this.busy(key, lock, reportHolder === true);
      }
    }
    const entry = this.waiters.entryOf(owner);
    const [verify, refreshed] = this.waiters.refreshFlags(owner, this.entryLifeMs);
    this.waiters.joining(owner);
    // A process's first wait: its place in line is taken now, and the wake-up subscriber is opened
    // beside it (a connection, on a Cluster `CLUSTER SLOTS` first: longer than a warm waiter's
    // round trip), so a waiter that asks later is never queued before it.
    const listening = this.wake.listening();
    this.waiters.sending(owner);
    let reply: [number, number?, string?];
    try {
      // Queued already (its heartbeat, or the holder's expiry when first in line): refresh its
      // place. Else join at the end.
      const keys = this.allKeysOf(key);
      reply = (await this.commands.call(
        'acquire',
        key,
        () =>
          entry
            ? this.commands.script(REQUEUE, keys, [owner, ttlMs, this.entryLifeMs, this.channel, entry, verify, refreshed])
            : this.commands.script(ENQUEUE, keys, [owner, ttlMs, this.entryLifeMs]),
        { owner, ttlMs },
      )) as [number, number?, string?];
    } catch (error) {
      // Not queued as far as we know (no connection, no answer): forget the owner here; a request
      // that did reach Redis is undone by call()'s clean-up, and its queue entry lapses anyway.
      this.waiters.forget(owner);
      throw error;
    }
    if (reply[0] === 1) {
      this.waiters.forget(owner);
      // Joined nobody: the key was free and nobody waited. The next try is a plain SET NX again
      // (one command, not the queue script's five).
      if (!entry) this.waiters.free(key);
      // Granted before we listened: firstGrant() waits for the subscriber, then checks the key is ours.
      return listening ? this.wake.firstGrant(key, owner) : this.granted(key, owner);
    }
    if (reply[0] === -1) {
      this.waiters.forget(owner);
      throw permitsMismatch(key, Number(reply[1]), 1);
    }
    if (reply[0] === -2) {
      this.waiters.forget(owner);
      throw layoutMismatch(this.name, key);
    }
    const holderMs = reply[1] ?? -1;
    this.waiters.queued(key, owner, holderMs);
    this.waiters.setEntry(owner, reply[2] ?? '', entry !== '');
    if (listening) await this.wake.heardOnce(listening, key, owner, (k, o) => this.release(k, o));
    return { acquired: false, holderRemainingMs: holderMs >= 0 ? holderMs : undefined };
  }

  /** Several keys in one step, or none (see acquireAllOnRedis). */
  acquireAll(keys: readonly string[], owners: readonly string[], ttlMs: number): Promise<AcquireResult> {
    return acquireAllOnRedis(
      {
        cluster: this.client.isCluster === true,
        keys: this.keys,
        commands: this.commands,
        release: (key, owner) => this.release(key, owner),
        extend: (key, owner, ttlMs) => this.extend(key, owner, ttlMs),
        needsFirstGrantCheck: () => !(this.wake.subscribed || this.config.queueing === false || this.closed),
        firstGrant: (key, owner) => this.wake.firstGrant(key, owner),
      },
      keys,
      owners,
      ttlMs,
    );
  }

  /** A refused `SET NX` without queueing: a semaphore on the key is a mismatch; else how long the holder has left, if asked. */
  private async busy(key: string, lock: string, reportHolder: boolean): Promise<AcquireResult> {
    if (this.config.queueing === false) {
      // A Redlock master: no semaphores here, and PTTL is all it needs.
      const pttl = Number(await this.commands.call('acquire', key, () => this.client.pttl(lock)));
      return { acquired: false, holderRemainingMs: pttl >= 0 ? pttl : undefined };
    }
    const reply = (await this.commands.call('acquire', key, () => this.commands.script(PLAIN_BUSY, [lock, `${lock}:sp`], []))) as number[];
    if (reply[0] === -1) throw permitsMismatch(key, Number(reply[1]), 1);
    const pttl = Number(reply[0]);
    return { acquired: false, holderRemainingMs: reportHolder && pttl >= 0 ? pttl : undefined };
  }

  /** Plain and semaphore waiters alike: a release or a leaving waiter wakes them, else the heartbeat. */
  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.waiters.wait(owner, timeoutMs, signal);
  }

  async extend(key: string, owner: string, ttlMs: number, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphoreOf().extend(key, owner, ttlMs);
    const reply = await this.commands.call('extend', key, () => this.commands.script(EXTEND, [this.keys.lock(key)], [owner, ttlMs]));
    // Not its key any more: the engine forgets the lease without a release.
    if (reply !== 1) this.waiters.releasing(owner);
    return reply === 1;
  }

  async release(key: string, owner: string, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphoreOf().release(key, owner);
    if (this.config.queueing === false) {
      return (await this.commands.call('release', key, () => this.commands.script(DELETE_IF_OWNER, [this.keys.lock(key)], [owner]))) === 1;
    }
    // A waiter giving up names its queue entry; a holder has none. Either deletes its refresh record, if any.
    const entry = this.waiters.entryOf(owner);
    const refreshed = this.waiters.releasing(owner) ? '1' : '0';
    this.waiters.forget(owner);
    const reply = await this.commands.call('release', key, () =>
      this.commands.script(RELEASE, this.keysOf(key), [owner, entry, this.entryLifeMs, this.channel, refreshed]),
    );
    return reply === 1;
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  inspect(key: string): Promise<HeldLock | null> {
    return this.admin.inspect(key);
  }

  listKeys(prefix: string, max: number): Promise<string[]> {
    return this.admin.listKeys(prefix, max);
  }

  /** The holder's process hears it on the wake channel (see granted()), else at its next renewal or validity end. */
  forceRelease(key: string): Promise<string | undefined> {
    return this.admin.forceRelease(key);
  }

  /** `PING` within `timeoutMs`, counting the wait for a connection. */
  ping(timeoutMs: number): Promise<void> {
    return this.commands.ping(timeoutMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.wake.close();
    if (this.config.ownsClient) await quit(this.client);
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
    this.wake.unref();
  }

  /** A forced release ended `owner`'s hold: a hand-off to it not yet started on is void, a lease of it is lost. */
  private forced(owner: string): void {
    this.waiters.revokeHandOff(owner);
    this.waiters.releasing(owner); // the engine forgets a force-released lease without a release
    this.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
  }

  /**
   * A grant. A process that holds a lock listens on the wake channel too, so that a forceRelease()
   * elsewhere reaches its holder at once. Pub/sub keeps nothing for a subscriber to come: the first
   * grant of a process waits for its subscription, then checks the key is still its own (a forced
   * release published before the subscription was heard by nobody). After a reconnect of the
   * subscriber, a holder learns of a forced release at its next renewal or its validity end.
   */
  private granted(key: string, owner: string): AcquireResult | Promise<AcquireResult> {
    // Every grant after the first: no promise, no round trip (acquire is measured per round trip).
    if (this.wake.subscribed || this.config.queueing === false || this.closed) return GRANTED;
    return this.wake.firstGrant(key, owner);
  }
}
