import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { boundedCall, withTimeout, type Unavailable } from '../backend-call.util.js';
import { AnswerDeadlines, type CallFailures } from '../answer-deadlines.js';
import { errorText } from '../../common/redact.util.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { runScript, type RedisScript } from './redis-script.loader.js';

/** A request whose answer never came may still be applied: what undoes it. */
export interface RedisCleanup {
  readonly owner: string;
  readonly ttlMs: number;
  /** The owner-checked delete (the lock's release unless given: a semaphore's, a group's). */
  readonly release?: (key: string, owner: string) => Promise<boolean>;
}

export interface RedisCommandsConfig {
  readonly name: string;
  readonly client: RedisClientLike;
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
  readonly closed: () => boolean;
  /** The lock's owner-checked release: the default clean-up of an acquire of unknown outcome. */
  readonly release: (key: string, owner: string) => Promise<boolean>;
}

/**
 * Every command of one Redis backend: a bounded wait for the connection and a bounded command
 * time (one deadline timer for all of them), so a dead Redis fails fast as
 * `LockBackendUnavailableError` instead of hanging; writes of many callers at once corked into one.
 */
export class RedisCommands {
  private readonly deadlines: AnswerDeadlines;
  private connected?: Promise<void>;
  /** Clean-ups past their ttl waiting for the client's next reconnection (see cleanUp). */
  private readonly reconnectRetries = new Set<() => void>();
  /** The socket corked until the next tick (see batchWrites), if any. */
  private corkedStream?: { uncork(): void };
  /** Commands written into the corked socket so far (see batchWrites). */
  private corkedCount = 0;

  /** Write the corked batch now (see batchWrites). */
  private flushBatch(): void {
    const stream = this.corkedStream;
    this.corkedStream = undefined;
    stream?.uncork();
  }

  constructor(private readonly config: RedisCommandsConfig) {
    this.deadlines = new AnswerDeadlines(config.commandTimeoutMs);
  }

  /**
   * Run one command. An acquire whose answer never came may still be applied later (ioredis
   * resends it after reconnecting): `cleanup` queues a compare-and-delete behind it so such a late
   * SET cannot leave a ghost lock.
   */
  call<T>(operation: string, key: string, send: () => Promise<T>, cleanup?: RedisCleanup): Promise<T> {
    // boundedCall's contract, without its options object and closures per command: one small
    // object holds what a failure needs (see RedisCall; the lock path sends two commands a lock).
    const call = new RedisCall(this, operation, key, cleanup);
    if (this.config.closed()) return Promise.reject(call.unavailable('the backend is closed (application shutting down)'));
    const status = this.config.client.status;
    const connecting = status === 'ready' || status === 'wait' ? undefined : this.ready((detail, cause) => call.unavailable(detail, cause));
    return connecting ? connecting.then(() => this.sendBounded(call, send)) : this.sendBounded(call, send);
  }

  private sendBounded<T>(call: RedisCall, send: () => Promise<T>): Promise<T> {
    let answer: Promise<T>;
    try {
      this.batchWrites();
      answer = send();
      if (this.corkedStream && ++this.corkedCount >= WRITE_BATCH) this.flushBatch();
    } catch (error) {
      answer = Promise.reject(error);
    }
    return this.deadlines.boundWith(answer, call);
  }

  /** A failed call's clean-up (see call): the owner-checked delete of an acquire of unknown outcome. */
  failedCall(key: string, cleanup: RedisCleanup | undefined): void {
    if (cleanup) this.cleanUp(key, cleanup.owner, cleanup.ttlMs, cleanup.release ?? this.config.release);
  }

  get commandTimeoutMs(): number {
    return this.config.commandTimeoutMs;
  }

  get name(): string {
    return this.config.name;
  }

  script(script: RedisScript, keys: string[], args: (string | number)[]): Promise<unknown> {
    return runScript(this.config.client, script, keys, args);
  }

  /** `script` by its text (`EVAL`): one request whatever the server's script cache holds. */
  evalNow(script: RedisScript, keys: string[], args: (string | number)[]): Promise<unknown> {
    return this.config.client.eval(script.lua, keys.length, ...keys, ...args);
  }

  /** `PING` within `timeoutMs`, counting the wait for a connection. */
  async ping(timeoutMs: number): Promise<void> {
    const { name, client } = this.config;
    const reply = await boundedCall({
      backend: name,
      operation: 'ping',
      closed: this.config.closed(),
      send: (unavailable) => (this.ready(unavailable) ?? Promise.resolve()).then(() => client.ping()),
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms (client status ${client.status})`,
    });
    if (reply !== 'PONG') throw new LockBackendUnavailableError(name, 'ping', `unexpected reply to PING: ${String(reply)}`);
  }

  /**
   * Delete `owner`'s key (owner-checked) after an acquire of unknown outcome. The delete goes out
   * behind the acquire on the same connection — after ioredis has resent it, when the connection
   * broke under it. If Redis cannot be reached yet (a reconnect slower than connectTimeoutMs), the
   * delete is tried again (50, 100, then every 200 ms, each try bounded) until Redis answers, the
   * key's ttl has passed or the backend closes — and past the ttl, once after each reconnection
   * (a client that resends sends the SET again then, with a fresh ttl): else the resent SET would
   * block the key for its ttl.
   */
  private cleanUp(key: string, owner: string, ttlMs: number, release: (key: string, owner: string) => Promise<boolean>, until = performance.now() + ttlMs, attempt = 0): void {
    // ioredis makes a new socket per connection: the one this try went out on (or waited for).
    const triedOn = this.socket();
    release(key, owner).catch(() => {
      if (this.config.closed()) return;
      const left = until - performance.now();
      if (left > 0) {
        // Soon: a key left by a resent SET blocks everyone (this owner's next try too) until deleted.
        setTimeout(() => this.cleanUp(key, owner, ttlMs, release, until, attempt + 1), Math.min(left, 50 * 2 ** Math.min(attempt, 2))).unref();
        return;
      }
      // Past the ttl. But a client that resends unanswered commands when it reconnects (ioredis's
      // default) sends the SET again with a fresh ttl, however long Redis was away: then once more
      // after a reconnection this try did not follow (no polling: on the next 'ready').
      // (A Cluster client has no socket of its own to compare: while it is ready this ends here,
      // and a single node's reconnection is not seen.)
      const { client } = this.config;
      if (!resendsUnanswered(client)) return;
      const retry = (): void => this.cleanUp(key, owner, ttlMs, release, until, attempt + 1);
      if (client.status === 'ready') {
        if (this.socket() !== triedOn) retry();
      } else if (client.status !== 'end') {
        this.onReconnect(retry);
      }
    });
  }

  private socket(): unknown {
    const client = this.config.client as RedisClientLike & { stream?: unknown };
    return client.connection ?? client.stream;
  }

  /** Run `retry` at the client's next 'ready' (one listener however many clean-ups wait). */
  private onReconnect(retry: () => void): void {
    this.reconnectRetries.add(retry);
    if (this.reconnectRetries.size > 1) return;
    this.config.client.once('ready', () => {
      const retries = [...this.reconnectRetries];
      this.reconnectRetries.clear();
      for (const run of retries) run();
    });
  }

  /**
   * Commands sent while others are in flight (many callers at once) leave a few at a time: the
   * socket is corked until WRITE_BATCH commands are in it or the callers resumed by the same
   * answers have all sent theirs, whichever comes first. Each socket write costs the client more
   * than the command it carries (loopback: the kernel's receive path runs in the sender's call),
   * so batching saves most of the client's CPU; but one write of everything turns client and
   * server into a ping-pong — the server idle while the client reads a whole batch of answers and
   * writes the next, the client idle while the server works through it. A bounded batch lets the
   * server start on the first commands while the client still makes the rest.
   */
  private batchWrites(): void {
    if (this.corkedStream || this.deadlines.inFlight === 0) return;
    this.corkedCount = 0;
    const stream = (this.config.client as { stream?: { cork?: () => void; uncork(): void; writable?: boolean } }).stream;
    if (typeof stream?.cork !== 'function' || !stream.writable) return;
    this.corkedStream = stream;
    stream.cork();
    process.nextTick(() => {
      if (this.corkedStream !== stream) return; // flushed meanwhile
      this.corkedStream = undefined;
      stream.uncork();
    });
  }

  /**
   * Write what is corked now. A claim written for a holder about to start must not wait for the
   * next tick: the holder's own synchronous work would run first, the reservation's clock running.
   */
  flush(): void {
    this.corkedStream = undefined;
    // Every cork of the socket, not only ours: another backend on the same client may have corked it this tick.
    const stream = (this.config.client as { stream?: { uncork(): void; writableCorked?: number } }).stream;
    for (let i = 0; stream && i < 64 && (stream.writableCorked ?? 0) > 0; i++) stream.uncork();
  }

  /** Whether the client holds commands back to send them together later (ioredis' `enableAutoPipelining`, node-redis always). */
  get holdsWrites(): boolean {
    if (this.config.client.holdsWrites === true) return true;
    const options = (this.config.client as { options?: { enableAutoPipelining?: boolean; redisOptions?: { enableAutoPipelining?: boolean } } }).options;
    return options?.enableAutoPipelining === true || options?.redisOptions?.enableAutoPipelining === true;
  }

  /** undefined when connected (no wait, not even a microtask), else the bounded wait for it. */
  private ready(unavailable: Unavailable): Promise<void> | undefined {
    const { client, connectTimeoutMs } = this.config;
    const status = client.status;
    if (status === 'ready' || status === 'wait') return undefined;
    if (status === 'end') return Promise.reject(unavailable('the client was closed'));
    // One 'ready' listener however many calls wait for the connection (a burst, or an outage).
    this.connected ??= new Promise<void>((resolve) => {
      client.once('ready', () => {
        this.connected = undefined;
        resolve();
      });
    });
    return withTimeout(this.connected, connectTimeoutMs, () =>
      unavailable(`not connected within ${connectTimeoutMs} ms (connectTimeoutMs; status ${client.status})`),
    );
  }
}

/**
 * The most commands one corked write carries (see batchWrites). Measured on 16 workers × 1,000
 * keys (bench --profile, 8 rounds, Node 24): unbounded 0.65× the floor for the backend alone and
 * 0.49× for the service; 4–8 a write 1.07–1.19× and 0.79–0.84×; 12 0.78× and 0.67×.
 */
const WRITE_BATCH = 6;
/** Whether the client sends unanswered commands again when it reconnects (ioredis's default). */
function resendsUnanswered(client: RedisClientLike): boolean {
  const options = (client as { options?: { autoResendUnfulfilledCommands?: boolean; redisOptions?: { autoResendUnfulfilledCommands?: boolean } } }).options;
  return (options?.autoResendUnfulfilledCommands ?? options?.redisOptions?.autoResendUnfulfilledCommands) !== false;
}

/**
 * One command's failure handling, as boundedCall gives it: every failure reaches the caller as
 * `LockBackendUnavailableError` (the client's own error as `cause`, stripped of credentials), a
 * time-out after commandTimeoutMs, and an acquire of unknown outcome cleaned up.
 */
class RedisCall implements CallFailures {
  constructor(
    private readonly commands: RedisCommands,
    private readonly operation: string,
    private readonly key: string,
    private readonly cleanup: RedisCleanup | undefined,
  ) {}

  unavailable(detail: string, cause?: unknown): LockBackendUnavailableError {
    return new LockBackendUnavailableError(this.commands.name, this.operation, detail, { key: this.key, cause });
  }

  timedOut(): Error {
    return this.unavailable(`no answer within ${this.commands.commandTimeoutMs} ms (commandTimeoutMs)`);
  }

  failed(error: unknown): unknown {
    this.commands.failedCall(this.key, this.cleanup);
    return error instanceof LockBackendUnavailableError ? error : this.unavailable(errorText(error), error);
  }
}
