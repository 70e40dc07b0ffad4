import { LossListeners } from '../loss-listeners.js';
import type { AcquireRequest, AcquireResult, HeldLock, LockBackend, LockLossListener, HoldKind } from '../lock-backend.interface.js';
import { HandOffWaiters } from '../hand-off-waiters.js';
import { retryInBackground, startOnHandOff } from '../hand-off-start.util.js';
import { permitsMismatch, permitsOf } from '../semaphore.util.js';
import { TurnWaiters } from '../wait-turn.util.js';
import { checkIdentifier, POSTGRES_CAPABILITIES, POSTGRES_DEFAULTS, type PostgresBackendConfig } from './postgres-backend.options.js';
import type { PgPoolLike } from './postgres-client.interface.js';
import { PostgresListener } from './postgres-listener.js';
import { PostgresQueries } from './postgres-queries.js';
import { objectNames, refuseNul, refuseUnstorable, SEMAPHORE_MARK } from './postgres-sql.util.js';
import { PostgresSemaphores, semaphoreHeld } from './postgres-semaphore.js';
import { backendStatements, type BackendStatements } from './postgres-statements.js';
import { setupStatements } from './postgres.sql.js';

/**
 * `correctness` (and `efficiency`) locks on PostgreSQL: a lease row per held key, with its expiry
 * on the database's clock, a token from a durable sequence (and the WAL timeline), a FIFO queue
 * with hand-off woken by LISTEN/NOTIFY. Every operation is one statement — one round trip, one
 * transaction: a plain INSERT or DELETE when the key is uncontended, else a function call — and
 * holds no connection per lock: at most the pool's connections, plus one session for LISTEN.
 * Statements are prepared (named) once per connection.
 */
export class PostgresBackend implements LockBackend {
  readonly capabilities = POSTGRES_CAPABILITIES;
  readonly name: string;
  private readonly pool: PgPoolLike;
  private readonly heartbeatMs: number;
  private readonly waiters = new HandOffWaiters();
  private readonly listener: PostgresListener;
  private readonly queries: PostgresQueries;
  private readonly sql: BackendStatements;
  private closed = false;
  private readonly lossListeners = new LossListeners();
  /** Semaphore waiters of this process (woken by '!sem <owner>'), and its semaphores from the first request with `permits` on. */
  private readonly semaphoreTurns = new TurnWaiters();
  private semaphores?: PostgresSemaphores;

  constructor(private readonly config: PostgresBackendConfig) {
    this.name = config.name ?? 'postgres';
    this.pool = config.pool;
    const where = `new PostgresBackend("${this.name}")`;
    const schema = checkIdentifier(config.schema ?? POSTGRES_DEFAULTS.schema, 'schema', where);
    const prefix = checkIdentifier(config.tablePrefix ?? POSTGRES_DEFAULTS.tablePrefix, 'tablePrefix', where);
    this.sql = backendStatements({ schema, prefix });
    const connectTimeoutMs = config.connectTimeoutMs ?? POSTGRES_DEFAULTS.connectTimeoutMs;
    const commandTimeoutMs = config.commandTimeoutMs ?? POSTGRES_DEFAULTS.commandTimeoutMs;
    this.heartbeatMs = config.waiterHeartbeatMs ?? POSTGRES_DEFAULTS.waiterHeartbeatMs;
    // An idle pooled connection that errors (the server restarted) must not crash the process.
    if (config.ownsPool) {
      this.pool.on('error', () => undefined);
      // pg-pool listens for a checked-out client's error only once per query: a connection killed
      // mid-query (the server crashed: 57P01) can emit a second one nobody hears, which Node turns
      // into an uncaught exception. Errors still reach every caller through its query's rejection.
      (this.pool as unknown as { on(event: 'connect', f: (client: { on(e: 'error', f: () => void): void }) => void): void }).on('connect', (client) =>
        client.on('error', () => undefined),
      );
    }
    this.listener = new PostgresListener(
      this.pool,
      objectNames({ schema, prefix }).channel,
      (owner, reservedMs, token) => this.waiters.handedOff(owner, reservedMs, token),
      connectTimeoutMs + commandTimeoutMs,
      (owner) => {
        // A hand-off to it not yet started on is void too (the key went on to the next waiter).
        this.waiters.revokeHandOff(owner);
        this.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
      },
      (owner) => this.semaphoreTurns.wake(owner),
    );
    const { pool, listener } = this;
    this.queries = new PostgresQueries({ name: this.name, pool, setupStatements: setupStatements({ schema, prefix }), listener, connectTimeoutMs, commandTimeoutMs, closed: () => this.closed });
  }

  /** This backend's semaphores (`permits` ≥ 2): the same pool, tables beside the leases', one token sequence. */
  private semaphoreOf(): PostgresSemaphores {
    const { name, sql, heartbeatMs, queries } = this;
    return (this.semaphores ??= new PostgresSemaphores({ name, sql, turns: this.semaphoreTurns, heartbeatMs, closed: () => this.closed, call: queries.call.bind(queries) }));
  }

  /** See LockBackend.bookkeeping. */
  bookkeeping(): Record<string, string[]> {
    const { waiters, semaphoreTurns, listener } = this;
    return { waiters: waiters.owners(), semaphoreTurns: semaphoreTurns.owners(), semaphoreWaits: this.semaphores?.waitingOwners() ?? [], listenProbes: listener.probeIds(), busyKeyCache: waiters.busyKeyCache() };
  }

  /** Create the tables and functions if absent and start listening, at bootstrap when the database answers (see PostgresQueries.start). */
  start(): Promise<void> {
    return this.queries.start();
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  async inspect(key: string): Promise<HeldLock | null> {
    refuseUnstorable(key, `${this.name} backend, inspect(${JSON.stringify(key)})`);
    const row = await this.queries.call('inspect', key, this.sql.inspect, [key]);
    if (row.token === undefined) return null;
    if (row.owner === SEMAPHORE_MARK) return semaphoreHeld(await this.queries.call('inspect', key, this.sql.semInspect, [key]));
    return { remainingMs: Number(row.remaining_ms), waiters: Number(row.waiters), token: BigInt(row.token as string), owner: String(row.owner) };
  }

  async listKeys(prefix: string, max: number): Promise<string[]> {
    refuseNul(prefix, `${this.name} backend, listKeys(${JSON.stringify(prefix)})`, 'prefix');
    const rows = await this.queries.rows('listKeys', prefix, this.sql.listKeys, [prefix, max]);
    return rows.map((row) => row.key as string);
  }

  /** Every process of this backend LISTENs from its start: the holder's hears the NOTIFY at once. */
  async forceRelease(key: string): Promise<string | undefined> {
    refuseUnstorable(key, `${this.name} backend, forceRelease(${JSON.stringify(key)})`);
    const row = await this.queries.call('forceRelease', key, this.sql.forceRelease, [key, this.heartbeatMs * 3]);
    return typeof row?.owner === 'string' ? row.owner : undefined;
  }

  checkKey(key: string): void {
    refuseUnstorable(key, `${this.name} backend, acquire(${JSON.stringify(key)})`);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    if (permitsOf(request) > 1) return this.semaphoreOf().acquire(request);
    const { key, owner, ttlMs, queue } = request;
    this.checkKey(key);
    if (queue && this.waiters.hasHandOff(owner)) {
      const granted = this.takeHandOff(key, owner, ttlMs, Math.min(ttlMs, request.validityMs ?? ttlMs));
      if (granted) return granted;
    }
    // A first try on a key not seen busy lately: the one-statement insert. A key busy a moment
    // ago is likely busy again: straight to the function (one round trip, not two).
    if (!this.waiters.isQueued(owner) && !this.waiters.recentlyBusy(key)) {
      const fast = await this.queries.call('acquire', key, this.sql.fastAcquire, [key, owner, ttlMs], this.cleanup(key, owner));
      if (fast.token !== undefined) return { acquired: true, token: BigInt(fast.token as string) };
      this.waiters.busy(key);
    }
    if (queue) {
      this.waiters.joining(owner);
      this.waiters.sending(owner);
    }
    let row: Record<string, any>;
    try {
      row = await this.queries.call('acquire', key, this.sql.acquire, [key, owner, ttlMs, queue, this.heartbeatMs * 3], this.cleanup(key, owner));
    } catch (error) {
      this.waiters.forget(owner);
      throw error;
    }
    // A semaphore holds or awaits the key (found only here, off the uncontended path).
    if (row.permits !== null && row.permits !== undefined) {
      this.waiters.forget(owner);
      throw permitsMismatch(key, Number(row.permits), 1);
    }
    if (row.acquired) {
      this.waiters.forget(owner);
      return { acquired: true, token: BigInt(row.token as string) };
    }
    if (queue) this.waiters.queued(key, owner, -1, row.token === null ? undefined : BigInt(row.token as string));
    else this.waiters.forget(owner);
    return { acquired: false, holderRemainingMs: row.holder_ms === null ? undefined : Number(row.holder_ms) };
  }

  /** See startOnHandOff: start at once on a hand-off, claiming the full ttl in the background when needed. */
  private takeHandOff(key: string, owner: string, ttlMs: number, validityMs: number): AcquireResult | undefined {
    return startOnHandOff(this.waiters, owner, validityMs, () => this.queries.call('extend', key, this.sql.extend, [key, owner, ttlMs]).then((row) => row.held === true));
  }

  /** A hand-off wakes the waiter at once; without one it re-checks every heartbeat (refreshing its place). */
  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal, hold?: HoldKind): Promise<void> {
    if (permitsOf(hold) > 1) return this.semaphoreOf().waitForTurn(_key, owner, timeoutMs, signal);
    return this.waiters.wait(owner, Math.min(timeoutMs, this.heartbeatMs), signal);
  }

  async extend(key: string, owner: string, ttlMs: number, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphoreOf().extend(key, owner, ttlMs);
    const row = await this.queries.call('extend', key, this.sql.extend, [key, owner, ttlMs]);
    return row.held === true;
  }

  async release(key: string, owner: string, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphoreOf().release(key, owner);
    const queued = this.waiters.isQueued(owner);
    this.waiters.forget(owner);
    try {
      // A holder nobody waits for: the one-statement delete. Else (a waiter leaving, waiters to hand
      // the key to, a row not ours): the function — at once for a key seen busy lately.
      if (!queued && !this.waiters.recentlyBusy(key)) {
        const fast = await this.queries.call('release', key, this.sql.fastRelease, [key, owner]);
        if (fast.held !== undefined) return fast.held === true;
        this.waiters.busy(key);
      }
      const row = await this.queries.call('release', key, this.sql.release, [key, owner, this.heartbeatMs * 3]);
      return row.held === true;
    } catch (error) {
      // Unanswered (the database restarting, unreachable): our row or our queue entry may still be
      // there, and a queue entry at the head is handed the key for a reservation nobody will claim
      // — the next holder would wait it out. Retry in the background while such an entry can live.
      this.retryRelease(key, owner, performance.now() + this.heartbeatMs * 3, 100);
      throw error;
    }
  }

  /** Every `delayMs` (at most 15 tries in 1.5 s); owner-checked, so never another owner's key; unref'd timers, none after close(). */
  private retryRelease(key: string, owner: string, until: number, delayMs: number): void {
    retryInBackground(() => this.closed, until, delayMs, () => this.queries.call('release', key, this.sql.release, [key, owner, this.heartbeatMs * 3]));
  }

  /** `SELECT 1` within `timeoutMs`, counting the wait for a connection. */
  ping(timeoutMs: number): Promise<void> {
    return this.queries.ping(timeoutMs);
  }

  /** Our connections never hold the process: the LISTEN session is unref'd, our pool exits when idle, calls and waits run on timers. */
  holdProcess(_hold: boolean): void {}

  async close(): Promise<void> {
    this.closed = true;
    await this.listener.close();
    if (this.config.ownsPool) await this.pool.end();
  }

  /** The clean-up of an acquire whose answer never came: an owner-checked release. */
  private cleanup(key: string, owner: string): () => void {
    return () => void this.release(key, owner).catch(() => undefined);
  }
}
