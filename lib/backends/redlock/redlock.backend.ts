import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend } from '../lock-backend.interface.js';
import { RedisBackend } from '../redis/redis.backend.js';
import { checkRedisClient, type RedisClientInput } from '../redis/redis-client.check.js';
import { TurnWaiters } from '../wait-turn.util.js';
import { REDLOCK_CAPABILITIES, REDLOCK_DEFAULTS } from './redlock-backend.options.js';
import { RedlockServers } from './redlock-servers.js';
import { MasterLatency } from './redlock-latency.js';
import { median, quorumNames, vote, type Tally } from './redlock-vote.js';

/** What `new RedlockBackend()` takes (the module builds one from `RedlockBackendOptions`). */
export interface RedlockBackendConfig {
  /** One client per independent master (ioredis, iovalkey or node-redis): an odd number, at least 3. */
  clients: RedisClientInput[];
  /** Close the clients in `close()` (true only when the module created them). */
  ownsClients: boolean;
  /** @default 'lock:' */
  keyPrefix?: string;
  /** Per-master time for one command, the wait for its connection included. @default 200 */
  nodeTimeoutMs?: number;
  /** A waiter retries after this plus up to as much random jitter. @default 50 */
  retryDelayMs?: number;
  name?: string;
  /** Where connection outages of the clients this backend owns are reported (once per outage). */
  log?: { warn(message: string): void; log(message: string): void };
}

/**
 * The Redlock algorithm (antirez's, as the seeds give it) over independent Redis masters, for
 * `efficiency` locks only:
 * - acquire: `SET key owner NX PX ttl` on every master at once, each bounded by a short per-node
 *   timeout; held when a majority said yes. The engine trusts the lease for ttl − drift from
 *   *before* the first request was sent (ttl − elapsed − drift when the majority is in), and
 *   refuses a grant that took longer than that.
 * - a minority: given back on every master that said yes, and on those that had not answered
 *   (owner-checked; the delete follows the SET on the same connection) before the next try. A
 *   try another caller contends (a master said no) waits for the masters still pending only a few
 *   times their usual answer time (redlock-latency.ts), not a stopped master's whole timeout.
 * - extend: the owner-checked PEXPIRE on every master; false when a majority no longer has our
 *   key — the engine then ends the lease and aborts its signal.
 * - release: the owner-checked delete on every master.
 * Each master is one single-Redis backend (its scripts, bounded calls, connection handling): only
 * the voting is new here. No fencing tokens: a master that restarts without its data (no AOF with
 * `appendfsync always`, no restart delay of at least the longest ttl) can give the key to a
 * second holder — which is why `correctness` is refused at bootstrap.
 */
export class RedlockBackend implements LockBackend {
  readonly capabilities = REDLOCK_CAPABILITIES;
  readonly name: string;
  private readonly nodes: RedisBackend[];
  private readonly quorum: number;
  private readonly retryDelayMs: number;
  private readonly turns = new TurnWaiters();
  /** Waiters of this process per key, in arrival order: a release here wakes the first at once. */
  private readonly waiting = new Map<string, string[]>();
  /** Per waiter, its split votes in a row (see acquire()); cleared when it leaves the line. */
  private readonly splits = new Map<string, number>();
  /**
   * Per owner holding a lease, the id its key carries on the masters: one per attempt
   * (`<owner>.<n>`), so the clean-up of an earlier attempt's unanswered SET (retried until a
   * master answers) can never delete a later attempt's key of the same owner.
   */
  private readonly held = new Map<string, string>();
  private attempts = 0;
  /** Which masters are one server under two names (their later one has no vote). */
  private readonly servers: RedlockServers;
  /** How long each master usually takes to answer an acquire: what a contended try waits for. */
  private readonly latency: MasterLatency;

  constructor(config: RedlockBackendConfig) {
    this.name = config.name ?? 'redlock';
    const clients = config.clients.map((client, i) => checkRedisClient(client, `clients[${i}]`, `new RedlockBackend("${this.name}")`));
    const count = clients.length;
    if (count < 3 || count % 2 === 0) throw new Error(`RedlockBackend: needs an odd number of masters, at least 3 (got ${count})`);
    const nodeTimeoutMs = config.nodeTimeoutMs ?? REDLOCK_DEFAULTS.nodeTimeoutMs;
    this.latency = new MasterLatency(count, nodeTimeoutMs);
    this.nodes = clients.map(
      (client, i) =>
        new RedisBackend({
          name: `${this.name}[${i}]`,
          client,
          ownsClient: config.ownsClients,
          keyPrefix: config.keyPrefix,
          // A master that is down or slow counts as a "no" after this, whatever it is doing.
          connectTimeoutMs: nodeTimeoutMs,
          commandTimeoutMs: nodeTimeoutMs,
          log: config.log,
          // Never queued on: a release is the plain owner-checked delete.
          queueing: false,
        }),
    );
    this.quorum = Math.floor(count / 2) + 1;
    this.retryDelayMs = config.retryDelayMs ?? REDLOCK_DEFAULTS.retryDelayMs;
    this.servers = new RedlockServers(clients, nodeTimeoutMs * 5, (earlier, later, runId) =>
      config.log?.warn(
        `${this.name}: masters [${earlier}] and [${later}] reach one Redis server (run_id ${runId.slice(0, 8)}…): it votes once, ` +
          `so ${this.quorum} of the other masters are needed — give Redlock ${count} independent servers`,
      ),
    );
  }

  /** `ask` master `i`, unless it is an earlier master's server again (then it counts as not answering). */
  private ask<T>(i: number, ask: (node: RedisBackend) => Promise<T>): Promise<T> {
    const earlier = this.servers.sameAs(i);
    if (earlier !== undefined) return Promise.reject(new Error(`master [${i}] is the same Redis server as master [${earlier}]`));
    return ask(this.nodes[i]);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const { key, owner, queue } = request;
    const attempt = `${owner}.${(this.attempts++).toString(36)}`;
    // In line before asking: a release here while we ask wakes us (remembered), so a waiter whose
    // try lost to a holder that released a moment later tries again at once, not after the delay.
    if (queue) this.joinLine(key, owner);
    const perMaster: AcquireRequest = { ...request, owner: attempt, queue: false };
    const tally = await vote(this.nodes.length, this.quorum, (i) => this.latency.timed(i, this.ask(i, (node) => node.acquire(perMaster))), (answer) => answer.acquired, 'yes', (pending) => this.latency.patienceMs(pending));
    if (tally.yes.length >= this.quorum) {
      this.held.set(owner, attempt);
      this.leaveLine(key, owner);
      return { acquired: true };
    }
    // A minority: give back what we got. A master that had not answered gets the delete behind
    // the SET on the same connection, so the next try (a new attempt id) never finds this one's
    // key there first; it is not waited for — a stopped master would hold every retry for its
    // whole timeout.
    void this.giveBack(key, attempt, tally.pending);
    await this.giveBack(key, attempt, tally.yes);
    // Some masters said yes and too few: another caller asked at the same moment (a split vote).
    // Both retry later by a wider random delay each time it happens again, until one of them
    // asks alone (Redlock's desynchronising retry; `splits` is forgotten when it leaves the line).
    if (queue && tally.yes.length > 0) this.splits.set(owner, Math.min(4, (this.splits.get(owner) ?? 0) + 1));
    else this.splits.delete(owner);
    if (tally.failed.length > this.nodes.length - this.quorum) {
      this.leaveLine(key, owner);
      throw this.unavailable('acquire', key, tally);
    }
    const reported = tally.answers.flatMap((a) => (a && !a.acquired && a.holderRemainingMs !== undefined ? [a.holderRemainingMs] : []));
    return { acquired: false, holderRemainingMs: median(reported) };
  }

  /**
   * No queue on the masters: retry after the delay plus jitter — up to 2⁴ times as much jitter after
   * split votes in a row — or at once when a release here wakes us.
   */
  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    const delay = this.retryDelayMs + Math.random() * this.retryDelayMs * 2 ** (this.splits.get(owner) ?? 0);
    return this.turns.wait(owner, Math.min(timeoutMs, delay), signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const attempt = this.held.get(owner);
    if (attempt === undefined) return false;
    const tally = await vote(this.nodes.length, this.quorum, (i) => this.ask(i, (node) => node.extend(key, attempt, ttlMs)), (extended) => extended);
    if (tally.yes.length >= this.quorum) return true;
    if (tally.yes.length + tally.failed.length >= this.quorum && tally.failed.length > 0) {
      // Not known lost: a majority may still hold it, but too few masters answered to say so.
      throw this.unavailable('extend', key, tally);
    }
    // Lost (the engine aborts the lease's signal and forgets it): what a minority of masters still
    // keeps for us goes now rather than at its ttl.
    if (this.held.get(owner) === attempt) this.held.delete(owner);
    void this.giveBack(key, attempt, [...tally.yes, ...tally.pending]);
    return false;
  }

  async release(key: string, owner: string): Promise<boolean> {
    this.leaveLine(key, owner);
    const attempt = this.held.get(owner);
    if (attempt === undefined) return false;
    this.held.delete(owner);
    const tally = await vote(this.nodes.length, this.quorum, (i) => this.ask(i, (node) => node.release(key, attempt)), (released) => released, 'answers');
    this.wakeNext(key);
    if (tally.yes.length + tally.no.length < this.quorum) throw this.unavailable('release', key, tally);
    return tally.yes.length > 0;
  }

  /**
   * Held when a majority of masters hold the key; what is left is how long a majority still will
   * (the quorum-th longest time left). No queue on the masters: `waiters` is 0.
   */
  async inspect(key: string): Promise<HeldLock | null> {
    const tally = await vote(this.nodes.length, this.quorum, (i) => this.ask(i, (node) => node.inspect(key)), (held) => held !== null, 'answers');
    if (tally.yes.length + tally.no.length < this.quorum) throw this.unavailable('inspect', key, tally);
    const left = tally.answers.flatMap((held) => (held ? [held.remainingMs] : [])).sort((a, b) => b - a);
    if (left.length < this.quorum) return null;
    // The holder, when one owner holds a majority (its process reports more of its hold).
    const owners = new Map<string, number>();
    for (const held of tally.answers) if (held?.owner !== undefined) owners.set(held.owner, (owners.get(held.owner) ?? 0) + 1);
    const owner = [...owners].find(([, count]) => count >= this.quorum)?.[0];
    return { remainingMs: left[this.quorum - 1], waiters: 0, ...(owner === undefined ? {} : { owner }) };
  }

  /**
   * The names a majority of the masters list (see quorumNames). Every master is waited for (each
   * bounded by nodeTimeoutMs), not only the first majority to answer: the slowest may be one of a
   * key's majority.
   */
  async listKeys(prefix: string, max: number): Promise<string[]> {
    const asked = this.nodes.map((_, i) =>
      this.ask(i, (node: LockBackend) => node.listKeys?.(prefix, max) ?? Promise.reject(new Error(`master [${i}] cannot list keys`))),
    );
    const tally = await vote(this.nodes.length, this.quorum, (i) => asked[i], () => true, 'answers');
    if (tally.yes.length < this.quorum) throw this.unavailable('listKeys', undefined, tally);
    return quorumNames(await Promise.all(asked.map((list) => list.catch(() => []))), this.quorum, max);
  }

  /**
   * The key deleted on every master, whoever holds it. The holder is not told by message (the
   * masters have no subscribers): it learns at its next renewal (a majority no longer has its
   * key) or at its validity end — in this process, at once.
   */
  async forceRelease(key: string): Promise<string | undefined> {
    const tally = await vote(this.nodes.length, this.quorum, (i) => this.ask(i, (node) => node.forceRelease(key)), () => true, 'answers');
    if (tally.yes.length < this.quorum) throw this.unavailable('forceRelease', key, tally);
    // The masters hold per-attempt ids (`<owner>.<n>`): the owner is the most common one's.
    const counts = new Map<string, number>();
    for (const attempt of tally.answers) if (attempt) counts.set(attempt, (counts.get(attempt) ?? 0) + 1);
    const attempt = [...counts].sort((a, b) => b[1] - a[1])[0]?.[0];
    if (attempt === undefined) return undefined;
    const owner = attempt.slice(0, attempt.lastIndexOf('.'));
    if (this.held.get(owner) === attempt) this.held.delete(owner);
    this.wakeNext(key);
    return owner;
  }

  /** Every master's `PING` within `timeoutMs`; up when a majority answers. */
  async ping(timeoutMs: number): Promise<void> {
    const tally = await vote(this.nodes.length, this.quorum, (i) => this.ask(i, (node) => node.ping(timeoutMs).then(() => true)), (ok) => ok);
    if (tally.yes.length < this.quorum) throw this.unavailable('ping', undefined, tally);
  }

  /** See LockBackend.bookkeeping: this process's line, holders and split counts, and each master's own. */
  bookkeeping(): Record<string, string[]> {
    const own = { turns: this.turns.owners(), lines: [...this.waiting.keys()], splits: [...this.splits.keys()], held: [...this.held.keys()] };
    const masters = this.nodes.flatMap((node, i) => Object.entries(node.bookkeeping()).map(([name, entries]) => [`master[${i}].${name}`, entries]));
    return { ...own, ...Object.fromEntries(masters) };
  }

  holdProcess(hold: boolean): void {
    for (const node of this.nodes) node.holdProcess(hold);
  }

  async close(): Promise<void> {
    for (const owner of [...this.waiting.values()].flat()) this.turns.forget(owner);
    this.waiting.clear();
    this.splits.clear();
    this.servers.close();
    await Promise.all(this.nodes.map((node) => node.close()));
  }

  /** The owner-checked delete on these masters (bounded each; failures leave the key to its ttl). */
  private async giveBack(key: string, owner: string, nodes: number[]): Promise<void> {
    await Promise.all(nodes.map((i) => this.nodes[i].release(key, owner).catch(() => undefined)));
  }

  private joinLine(key: string, owner: string): void {
    this.turns.track(owner);
    const line = this.waiting.get(key);
    if (!line) this.waiting.set(key, [owner]);
    else if (!line.includes(owner)) line.push(owner);
  }

  private leaveLine(key: string, owner: string): void {
    this.turns.forget(owner);
    this.splits.delete(owner);
    const line = this.waiting.get(key);
    if (!line) return;
    const i = line.indexOf(owner);
    if (i >= 0) line.splice(i, 1);
    if (line.length === 0) this.waiting.delete(key);
  }

  /** The key is free as far as this process knows: its longest waiter here tries at once. */
  private wakeNext(key: string): void {
    const next = this.waiting.get(key)?.[0];
    if (next !== undefined) this.turns.wake(next);
  }

  private unavailable(operation: string, key: string | undefined, tally: Tally<unknown>): LockBackendUnavailableError {
    const answered = tally.yes.length + tally.no.length;
    const first = tally.errors[0] as Error | undefined;
    return new LockBackendUnavailableError(
      this.name,
      operation,
      `${answered} of ${this.nodes.length} masters answered, ${this.quorum} are needed — the others are down, unreachable or ` +
        `slower than redlock.nodeTimeoutMs; the lock cannot be taken or kept until a majority answers` +
        (first ? ` (first error: ${first.message})` : ''),
      { key, cause: first },
    );
  }
}
