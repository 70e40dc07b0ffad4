// Over 250 lines on purpose: acquire with its hand-off claim, release, extend, inspect, forced
// release, ping and close over one client and its wake-up (and loss) subscriber. Waiters, connection helpers, scripts, the
// script loader and the semaphore view live in the files beside this one.
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { LossListeners } from '../loss-listeners.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { REDIS_CAPABILITIES, REDIS_DEFAULTS, type RedisBackendConfig } from './redis-backend.options.js';
import { checkRedisKeyPrefix, redisHashTag } from './redis-keys.util.js';
import { boundedCall, withTimeout, type Unavailable } from '../backend-call.util.js';
import { AnswerDeadlines } from '../answer-deadlines.js';
import { quit, RedisOutageLog, unref } from './redis-connection.util.js';
import { RedisWaiters } from './redis-waiters.js';
import { runScript, type RedisScript } from './redis-script.loader.js';
import { DELETE_IF_OWNER, ENQUEUE, EXTEND, RELEASE, SET_ALL_NX } from './redis.scripts.js';
import { RedisAdmin } from './redis-admin.js';
import { PLAIN_BUSY } from './redis-semaphore.scripts.js';
import { RedisSemaphore, type RedisSemaphoreHost } from './redis-semaphore.js';
import { permitsMismatch } from '../semaphore.util.js';

/** A wake-channel message that ends a lease: `!lost <owner>` (owner ids never start with `!`). */
const LOST = '!lost ';

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
  private readonly prefix: string;
  private readonly channel: string;
  private readonly prefixHasBrace: boolean;
  private readonly connectTimeoutMs: number;
  private readonly commandTimeoutMs: number;
  private readonly entryLifeMs: number;
  private readonly waiters: RedisWaiters;
  private subscriber?: RedisClientLike;
  private subscribing?: Promise<void>;
  /** The wake channel's SUBSCRIBE was answered once (a holder's grant no longer waits for it). */
  private subscribed = false;
  private connected?: Promise<void>;
  private closed = false;
  private readonly outages: RedisOutageLog;
  private readonly deadlines: AnswerDeadlines;
  private corked = false;
  private readonly lossListeners = new LossListeners();
  /** Semaphore views by permits (the engine asks once per permits value). */
  private readonly views = new Map<number, RedisSemaphore>();
  /** inspect(), listKeys(), forceRelease(). */
  private readonly admin: RedisAdmin;

  constructor(private readonly config: RedisBackendConfig) {
    this.client = config.client;
    this.name = config.name ?? 'redis';
    this.outages = new RedisOutageLog(this.name, config.log, () => this.closed);
    // The application's own client reports its errors to the application; ours to our log.
    if (config.ownsClient) {
      this.outages.watch(this.client, true);
      this.client.on('connect', () => unref(this.client));
    }
    this.prefix = checkRedisKeyPrefix(config.keyPrefix ?? REDIS_DEFAULTS.keyPrefix, config.client.isCluster === true, `new RedisBackend("${this.name}")`, 'keyPrefix');
    this.channel = `${this.prefix}__wake`;
    this.prefixHasBrace = this.prefix.includes('{');
    this.connectTimeoutMs = config.connectTimeoutMs ?? REDIS_DEFAULTS.connectTimeoutMs;
    this.commandTimeoutMs = config.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs;
    const heartbeatMs = config.waiterHeartbeatMs ?? REDIS_DEFAULTS.waiterHeartbeatMs;
    this.entryLifeMs = heartbeatMs * 3;
    this.waiters = new RedisWaiters(heartbeatMs);
    this.deadlines = new AnswerDeadlines(this.commandTimeoutMs);
    this.admin = new RedisAdmin({
      name: this.name,
      client: this.client,
      prefix: this.prefix,
      channel: this.channel,
      entryLifeMs: this.entryLifeMs,
      call: (operation, key, send) => this.call(operation, key, send),
      script: (script, keys, args) => this.script(script, keys, args),
      allKeysOf: (key) => this.allKeysOf(key),
      lockKeyOf: (key) => this.lockKeyOf(key),
    });
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
    const lock = this.lockKeyOf(key);
    return [lock, `${lock}:q`, `${lock}:qa`];
  }

  /**
   * keysOf() and a semaphore's three keys beside them (its queue, its queue's liveness, its
   * permits), in the order the scripts read them (see redis-semaphore.scripts.ts). The holders of a
   * semaphore live at the lock key itself, so a plain `SET NX` fails on them.
   */
  allKeysOf(key: string): string[] {
    const lock = this.lockKeyOf(key);
    return [lock, `${lock}:q`, `${lock}:qa`, `${lock}:sq`, `${lock}:sqa`, `${lock}:sp`];
  }

  /** This backend's semaphores (`permits` ≥ 2): same keys, client, wake channel and loss listeners. */
  semaphore(permits: number): RedisSemaphore {
    let view = this.views.get(permits);
    if (!view) {
      const host: RedisSemaphoreHost = {
        name: this.name,
        capabilities: this.capabilities,
        channel: this.channel,
        entryLifeMs: this.entryLifeMs,
        waiters: this.waiters,
        allKeysOf: (key) => this.allKeysOf(key),
        listening: () => this.listening(),
        heardOnce: (listening, key, owner, giveBack) => this.heardOnce(listening, key, owner, giveBack),
        call: (operation, key, send, cleanup) => this.call(operation, key, send, cleanup),
        script: (script, keys, args) => this.script(script, keys, args),
      };
      view = new RedisSemaphore(host, permits);
      this.views.set(permits, view);
    }
    return view;
  }

  /** The first of keysOf(). Without a `{` in the prefix, only an empty key or one starting with `}` needs the encoded form. */
  private lockKeyOf(key: string): string {
    const lock = `${this.prefix}{${key}}`;
    const plain = this.prefixHasBrace ? redisHashTag(lock) !== undefined : key.length > 0 && key.charCodeAt(0) !== 0x7d;
    return plain ? lock : `${this.prefix}%{${key.replaceAll('%', '%25').replaceAll('}', '%7D')}}`;
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const { key, owner, ttlMs, queue, reportHolder } = request;
    if (queue && this.waiters.hasHandOff(owner)) {
      // The engine trusts a grant for its ttl only: with a lock-delay it asks the server to keep
      // the key longer (ttlMs = ttl + lockDelay) than it will trust it (validityMs = ttl).
      const validityMs = Math.min(ttlMs, request.validityMs ?? ttlMs);
      const granted = this.takeHandOff(key, owner, ttlMs, validityMs);
      if (granted) return granted;
    }
    // A key that was busy a moment ago is likely busy again: queue at once (one round trip)
    // instead of a SET NX that fails first. The queue script takes the key itself when free.
    if (!(queue && this.waiters.recentlyBusy(key)) && (!queue || !this.waiters.isQueued(owner))) {
      const lock = this.lockKeyOf(key);
      const reply = await this.call('acquire', key, () => this.client.set(lock, owner, 'PX', ttlMs, 'NX'), { owner, ttlMs });
      if (reply === 'OK') return this.granted(key, owner);
      if (!queue) {
        // Busy without queueing: say when the holder's lease ends (Retry-After) only to a caller
        // that will report it — a skipped @Cron tick must not pay a second round trip.
        // A process that uses semaphores here also learns on a busy try whether the key is one
        // (a mismatch); one that never does skips that round trip, and learns when it queues.
        if (!reportHolder && this.views.size === 0) return { acquired: false };
        return this.busy(key, lock, reportHolder === true);
      }
    }
    this.waiters.joining(owner);
    // A process's first wait: its place in line is taken now, and the wake-up subscriber is opened
    // beside it (a connection, on a Cluster `CLUSTER SLOTS` first: longer than a warm waiter's
    // round trip), so a waiter that asks later is never queued before it.
    const listening = this.listening();
    this.waiters.sending(owner);
    let reply: [number, number?];
    try {
      reply = (await this.call(
        'acquire',
        key,
        () => this.script(ENQUEUE, this.allKeysOf(key), [owner, ttlMs, this.entryLifeMs, this.channel]),
        { owner, ttlMs },
      )) as [number, number?];
    } catch (error) {
      // Not queued as far as we know (no connection, no answer): forget the owner here; a request
      // that did reach Redis is undone by call()'s clean-up, and its queue entry expires anyway.
      this.waiters.forget(owner);
      throw error;
    }
    if (reply[0] === 1) {
      this.waiters.forget(owner);
      // Granted before we listened: firstGrant() waits for the subscriber, then checks the key is ours.
      return listening ? this.firstGrant(key, owner) : this.granted(key, owner);
    }
    if (reply[0] === -1) {
      this.waiters.forget(owner);
      throw permitsMismatch(key, Number(reply[1]), 1);
    }
    const holderMs = reply[1] ?? -1;
    this.waiters.queued(key, owner, holderMs);
    if (listening) await this.heardOnce(listening, key, owner, (k, o) => this.release(k, o));
    return { acquired: false, holderRemainingMs: holderMs >= 0 ? holderMs : undefined };
  }

  /** undefined once the wake channel is subscribed, else the wait for it (its failure handled by whoever awaits it). */
  private listening(): Promise<void> | undefined {
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
  private async heardOnce(listening: Promise<void>, key: string, owner: string, giveBack: (key: string, owner: string) => Promise<unknown>): Promise<void> {
    try {
      await listening;
    } catch (error) {
      this.waiters.forget(owner);
      await giveBack(key, owner).catch(() => undefined);
      throw error instanceof LockBackendUnavailableError ? error : new LockBackendUnavailableError(this.name, 'subscribe', `could not subscribe to wake-ups: ${(error as Error)?.message ?? String(error)}`, { key });
    }
    this.waiters.wake(owner);
  }

  /**
   * Several keys in one step, or none (a multi-key lease's first try): one script per slot group
   * — all of them on a standalone or Sentinel Redis; in a Cluster, the keys that share a hash tag
   * (`{order:42}:items`, `{order:42}:payment`) go together and the groups one after the other,
   * the ones taken given back if a later group is busy. Busy: nothing is left held, and the
   * multi-key lease goes on key by key through the queue.
   */
  async acquireAll(keys: readonly string[], owners: readonly string[], ttlMs: number): Promise<AcquireResult> {
    const locks = keys.map((key) => this.lockKeyOf(key));
    const groups = new Map<string, number[]>();
    keys.forEach((_, i) => {
      const slot = this.config.client.isCluster === true ? (redisHashTag(locks[i]) ?? locks[i]) : '';
      groups.set(slot, [...(groups.get(slot) ?? []), i]);
    });
    const taken: number[] = [];
    const giveBack = (indexes: number[]): Promise<unknown> => Promise.all(indexes.map((i) => this.release(keys[i], owners[i]).catch(() => undefined)));
    for (const group of groups.values()) {
      const reply = await this.call(
        'acquire',
        keys[group[0]],
        () => this.script(SET_ALL_NX, group.map((i) => locks[i]), [...group.map((i) => owners[i]), ttlMs]),
        // An answer that never came may still be applied: every key of the group is deleted behind it.
        { owner: owners[group[0]], ttlMs, release: async () => (await giveBack(group), true) },
      ).catch(async (error: unknown) => {
        await giveBack(taken);
        throw error;
      });
      if (reply !== 1) {
        await giveBack(taken);
        return { acquired: false };
      }
      taken.push(...group);
    }
    if (groups.size > 1) {
      // A Cluster's groups go one after another: a key of an earlier one may have been force-
      // released meanwhile. Ask (owner-checked, each its full ttl again) before calling it a grant.
      const last = new Set([...groups.values()].at(-1));
      const earlier = taken.filter((i) => !last.has(i));
      const kept = await Promise.all(earlier.map((i) => this.extend(keys[i], owners[i], ttlMs))).catch(async (error: unknown) => {
        await giveBack(taken);
        throw error;
      });
      if (!kept.every(Boolean)) {
        await giveBack(taken);
        return { acquired: false };
      }
    }
    if (this.subscribed || this.config.queueing === false || this.closed) return GRANTED;
    // A process's first grant: as granted(), listen first, then check no key was force-released meanwhile.
    for (let i = 0; i < keys.length; i++) {
      if ((await this.firstGrant(keys[i], owners[i])).acquired) continue;
      await giveBack(taken);
      return { acquired: false };
    }
    return GRANTED;
  }

  /** A refused `SET NX` without queueing: a semaphore on the key is a mismatch; else how long the holder has left, if asked. */
  private async busy(key: string, lock: string, reportHolder: boolean): Promise<AcquireResult> {
    if (this.config.queueing === false) {
      // A Redlock master: no semaphores here, and PTTL is all it needs.
      const pttl = Number(await this.call('acquire', key, () => this.client.pttl(lock)));
      return { acquired: false, holderRemainingMs: pttl >= 0 ? pttl : undefined };
    }
    const reply = (await this.call('acquire', key, () => this.script(PLAIN_BUSY, [lock, `${lock}:sp`], []))) as number[];
    if (reply[0] === -1) throw permitsMismatch(key, Number(reply[1]), 1);
    const pttl = Number(reply[0]);
    return { acquired: false, holderRemainingMs: reportHolder && pttl >= 0 ? pttl : undefined };
  }

  /**
   * The release that woke us reserved the key for us and took us out of the queue: start at once
   * on that reservation (see RedisWaiters.handOff) and claim the full ttl in the background — one
   * round trip less per hand-off. undefined: too little of it is left; claim first.
   */
  private takeHandOff(key: string, owner: string, ttlMs: number, validityMs: number): AcquireResult | undefined {
    const reservation = this.waiters.handOff(owner, validityMs);
    if (!reservation) return undefined;
    this.waiters.forget(owner);
    const sentAt = performance.now();
    const confirmed = this.call('acquire', key, () => this.script(EXTEND, [this.lockKeyOf(key)], [owner, ttlMs])).then((reply) =>
      reply === 1 ? sentAt : undefined,
    );
    confirmed.catch(() => undefined); // a failed claim leaves the reservation to run out
    return { acquired: true, provisional: { ...reservation, confirmed } };
  }

  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.waiters.wait(owner, timeoutMs, signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const reply = await this.call('extend', key, () => this.script(EXTEND, [this.lockKeyOf(key)], [owner, ttlMs]));
    return reply === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    if (this.config.queueing === false) {
      return (await this.call('release', key, () => this.script(DELETE_IF_OWNER, [this.lockKeyOf(key)], [owner]))) === 1;
    }
    this.waiters.forget(owner);
    const reply = await this.call('release', key, () =>
      this.script(RELEASE, this.keysOf(key), [owner, this.entryLifeMs, this.channel]),
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
  async ping(timeoutMs: number): Promise<void> {
    const reply = await boundedCall({
      backend: this.name,
      operation: 'ping',
      closed: this.closed,
      // The wait for a connection counts against timeoutMs here.
      send: (unavailable) => (this.ready(unavailable) ?? Promise.resolve()).then(() => this.client.ping()),
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

  /** A forced release ended `owner`'s hold: a hand-off to it not yet started on is void, a lease of it is lost. */
  private forced(owner: string): void {
    this.waiters.revokeHandOff(owner);
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
    if (this.subscribed || this.config.queueing === false || this.closed) return GRANTED;
    return this.firstGrant(key, owner);
  }

  private async firstGrant(key: string, owner: string): Promise<AcquireResult> {
    try {
      await this.subscribe();
    } catch {
      return { acquired: true }; // no wake channel: the grant stands, the holder learns later
    }
    // pcall: a semaphore may have taken the key meanwhile (GET of its set is WRONGTYPE).
    const holder = await this.call('acquire', key, () => this.client.eval("return redis.pcall('GET', KEYS[1])", 1, this.lockKeyOf(key)));
    return holder === owner ? { acquired: true } : { acquired: false };
  }

  /** One connection for wake-ups and losses, opened on the first wait or grant (a dedicated duplicate: we own and close it). */
  private subscribe(): Promise<void> {
    this.subscribing ??= (async () => {
      // ioredis re-subscribes by itself after a reconnect, with a command nobody awaits: closed
      // before its answer, it rejects unhandled and the process crashes. We re-subscribe ourselves.
      const subscriber = this.client.duplicate({ autoResubscribe: false });
      subscriber.on('error', () => undefined);
      this.outages.watch(subscriber, false);
      subscriber.on('connect', () => unref(subscriber));
      let subscribed = false;
      subscriber.on('ready', () => {
        if (subscribed) subscriber.subscribe(this.channel).catch(() => undefined);
      });
      subscriber.on('message', (channel: string, message: string) => {
        if (channel !== this.channel) return;
        if (!message.startsWith(LOST)) this.waiters.onMessage(message);
        else this.forced(message.slice(LOST.length));
      });
      this.subscriber = subscriber;
      if (this.closed) await quit(subscriber);
      await subscriber.subscribe(this.channel);
      subscribed = true;
      this.subscribed = true;
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
   * never came may still be applied later (ioredis resends it after reconnecting): `cleanup`
   * queues a compare-and-delete behind it so such a late SET cannot leave a ghost lock.
   */
  private call<T>(
    operation: string,
    key: string,
    send: () => Promise<T>,
    cleanup?: { owner: string; ttlMs: number; release?: (key: string, owner: string) => Promise<boolean> },
  ): Promise<T> {
    return boundedCall({
      backend: this.name,
      operation,
      key,
      closed: this.closed,
      connected: (unavailable) => this.ready(unavailable),
      send: () => {
        this.batchWrites();
        return send();
      },
      timeoutMs: this.commandTimeoutMs,
      deadlines: this.deadlines,
      timedOut: () => `no answer within ${this.commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: () => {
        if (cleanup) this.cleanUp(key, cleanup.owner, cleanup.ttlMs, cleanup.release ?? ((k, o) => this.release(k, o)));
      },
    });
  }

  /**
   * Delete `owner`'s key (owner-checked) after an acquire of unknown outcome. The delete goes out
   * behind the acquire on the same connection — after ioredis has resent it, when the connection
   * broke under it. If Redis cannot be reached yet (a reconnect slower than connectTimeoutMs), the
   * delete is tried again (50, 100, then every 200 ms, each try bounded) until Redis answers, the
   * key's ttl has passed (it is gone by then anyway) or the backend closes: else the resent SET
   * would block the key for its ttl. `release`: the lock's, or a semaphore view's.
   */
  private cleanUp(key: string, owner: string, ttlMs: number, release: (key: string, owner: string) => Promise<boolean>, until = performance.now() + ttlMs, attempt = 0): void {
    release(key, owner).catch(() => {
      const left = until - performance.now();
      if (this.closed || left <= 0) return;
      // Soon: a key left by a resent SET blocks everyone (this owner's next try too) until deleted.
      setTimeout(() => this.cleanUp(key, owner, ttlMs, release, until, attempt + 1), Math.min(left, 50 * 2 ** Math.min(attempt, 2))).unref();
    });
  }

  /**
   * Commands sent while others are in flight (many callers at once) leave in one write: the
   * socket is corked until the callers resumed by the same answers have all sent theirs.
   */
  private batchWrites(): void {
    if (this.corked || this.deadlines.inFlight === 0) return;
    const stream = (this.client as { stream?: { cork?: () => void; uncork(): void; writable?: boolean } }).stream;
    if (typeof stream?.cork !== 'function' || !stream.writable) return;
    this.corked = true;
    stream.cork();
    process.nextTick(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  /** undefined when connected (no wait, not even a microtask), else the bounded wait for it. */
  private ready(unavailable: Unavailable): Promise<void> | undefined {
    const status = this.client.status;
    if (status === 'ready' || status === 'wait') return undefined;
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
