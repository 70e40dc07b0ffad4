import { HandOffWaiters } from '../hand-off-waiters.js';
import { retryInBackground, startOnHandOff } from '../hand-off-start.util.js';
import type { AcquireRequest, AcquireResult, HeldLock, HoldKind, LockBackend, LockLossListener } from '../lock-backend.interface.js';
import { LossListeners } from '../loss-listeners.js';
import { permitsMismatch, permitsOf } from '../semaphore.util.js';
import { checkMySqlIdentifier, MYSQL_CAPABILITIES, MYSQL_DEFAULTS, type MySqlBackendConfig } from './mysql-backend.options.js';
import { ER, type MySqlPoolLike, type MySqlResultHeader } from './mysql-client.interface.js';
import { MySqlDoorbell } from './mysql-doorbell.js';
import { MySqlQueries } from './mysql-queries.js';
import { MySqlSemaphores } from './mysql-semaphores.js';
import { SEMAPHORE_MARK } from './mysql-semaphore.sql.js';
import { allRows, bytes, firstRow, matchedRows, mysqlNames, prefixPattern, refuseUnstorable, text } from './mysql-sql.util.js';
import { mysqlStatements, type MySqlStatements } from './mysql-statements.js';

/** A mail line of a forced release: '!lost <owner>'. */
const LOST = '!lost ';
/** A semaphore waiter's mail line: a permit may be free ('!sem <owner>'). */
const SEMAPHORE_TURN = '!sem ';

/**
 * `correctness` (and `efficiency`) locks on MySQL 8 or MariaDB 10.11: a lease row per held key,
 * its expiry on the server's clock, its token from a durable AUTO_INCREMENT, a FIFO queue with
 * hand-off, waiters woken by a doorbell (mysql-doorbell.ts). The uncontended acquire and release
 * are one plain statement each; a busy key's calls are one procedure CALL (mysql.sql.ts). No
 * connection is held per lock: the pool's, plus one for the doorbell.
 */
export class MySqlBackend implements LockBackend {
  readonly capabilities = MYSQL_CAPABILITIES;
  readonly name: string;
  private readonly pool: MySqlPoolLike;
  private readonly heartbeatMs: number;
  private readonly waiters = new HandOffWaiters();
  private readonly doorbell: MySqlDoorbell;
  private readonly queries: MySqlQueries;
  private readonly sql: MySqlStatements;
  private readonly lossListeners = new LossListeners();
  private readonly semaphores: MySqlSemaphores;
  private closed = false;

  constructor(private readonly config: MySqlBackendConfig & { log?: { warn(message: string): void } }) {
    this.name = config.name ?? 'mysql';
    this.pool = config.pool;
    const where = `new MySqlBackend("${this.name}")`;
    const names = mysqlNames(checkMySqlIdentifier(config.tablePrefix ?? MYSQL_DEFAULTS.tablePrefix, 'tablePrefix', where));
    this.sql = mysqlStatements(names);
    this.heartbeatMs = config.waiterHeartbeatMs ?? MYSQL_DEFAULTS.waiterHeartbeatMs;
    const log = config.log ?? { warn: (message: string) => console.warn(message) };
    // An idle pooled connection that errors (the server restarted) must not crash the process.
    if (config.ownsPool) this.pool.on('error', () => undefined);
    this.doorbell = new MySqlDoorbell(this.pool, names, (body) => this.mail(body), log);
    this.queries = new MySqlQueries({
      name: this.name,
      pool: this.pool,
      names,
      doorbell: this.doorbell,
      connectTimeoutMs: config.connectTimeoutMs ?? MYSQL_DEFAULTS.connectTimeoutMs,
      commandTimeoutMs: config.commandTimeoutMs ?? MYSQL_DEFAULTS.commandTimeoutMs,
      closed: () => this.closed,
      log,
    });
    const { queries } = this;
    this.semaphores = new MySqlSemaphores({
      sql: this.sql,
      heartbeatMs: this.heartbeatMs,
      listener: () => this.doorbell.id,
      call: queries.call.bind(queries),
      ring: (rings) => this.ringAll(rings),
    });
  }

  /** See LockBackend.bookkeeping. */
  bookkeeping(): Record<string, string[]> {
    return { waiters: this.waiters.owners(), busyKeyCache: this.waiters.busyKeyCache(), semaphoreTurns: this.semaphores.waitingOwners() };
  }

  /** Create the tables and procedures if absent and start the doorbell, at bootstrap when the database answers. */
  start(): Promise<void> {
    return this.queries.start();
  }

  onLeaseLost(listener: LockLossListener): () => void {
    return this.lossListeners.add(listener);
  }

  checkKey(key: string): void {
    refuseUnstorable(key, `${this.name} backend, acquire(${JSON.stringify(key)})`);
  }

  async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const { key, owner, ttlMs, queue } = request;
    this.checkKey(key);
    if (permitsOf(request) > 1) return this.semaphores.acquire({ ...request, permits: permitsOf(request) });
    if (queue && this.waiters.hasHandOff(owner)) {
      const granted = this.takeHandOff(key, owner, ttlMs, Math.min(ttlMs, request.validityMs ?? ttlMs));
      if (granted) return granted;
    }
    const k = bytes(key);
    const o = bytes(owner);
    // A first try on a key not seen busy lately: the one-statement insert. A key busy a moment
    // ago is likely busy again: straight to the procedure (one round trip, not two).
    if (!this.waiters.isQueued(owner) && !this.waiters.recentlyBusy(key)) {
      const [header] = await this.queries.call('acquire', key, this.sql.fastAcquire, [k, k, o, Math.ceil(ttlMs * 1000), this.doorbell.id], this.cleanup(key, owner), ER.DUP_ENTRY);
      const { insertId: id, errno } = header as MySqlResultHeader & { errno?: number };
      // A number past 2^53 is not exact: the procedure (ours already) reads the token back as text.
      if (errno === undefined && (typeof id === 'string' || Number.isSafeInteger(id))) return { acquired: true, token: BigInt(id!) };
      if (errno !== undefined) this.waiters.busy(key);
    }
    if (queue) {
      this.waiters.joining(owner);
      this.waiters.sending(owner);
    }
    let row: Record<string, unknown>;
    try {
      row = firstRow(
        await this.queries.call('acquire', key, this.sql.acquire, [k, o, Math.ceil(ttlMs), queue ? 1 : 0, this.heartbeatMs * 3, this.doorbell.id], this.cleanup(key, owner)),
      );
    } catch (error) {
      this.waiters.forget(owner);
      throw error;
    }
    this.wake(row.wake, row.body);
    // A semaphore holds or awaits the key (found only here, off the uncontended path).
    if (row.permits !== null && row.permits !== undefined) {
      this.waiters.forget(owner);
      throw permitsMismatch(key, Number(row.permits), 1);
    }
    if (Number(row.acquired) === 1) {
      this.waiters.forget(owner);
      return { acquired: true, token: BigInt(text(row.token)) };
    }
    if (queue) this.waiters.queued(key, owner, -1, row.token === null || row.token === undefined ? undefined : BigInt(text(row.token)));
    else this.waiters.forget(owner);
    return { acquired: false, holderRemainingMs: row.holder_ms === null || row.holder_ms === undefined ? undefined : Number(row.holder_ms) };
  }

  /** See startOnHandOff: start at once on a hand-off, claiming the full ttl in the background when needed. */
  private takeHandOff(key: string, owner: string, ttlMs: number, validityMs: number): AcquireResult | undefined {
    return startOnHandOff(this.waiters, owner, validityMs, () => this.extend(key, owner, ttlMs));
  }

  /** A hand-off wakes the waiter at once; without one it re-checks every heartbeat (refreshing its place). */
  waitForTurn(_key: string, owner: string, timeoutMs: number, signal?: AbortSignal, hold?: HoldKind): Promise<void> {
    if (permitsOf(hold) > 1) return this.semaphores.waitForTurn(owner, timeoutMs, signal);
    return this.waiters.wait(owner, Math.min(timeoutMs, this.heartbeatMs), signal);
  }

  async extend(key: string, owner: string, ttlMs: number, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphores.extend(key, owner, ttlMs);
    const [header] = await this.queries.call('extend', key, this.sql.extend, [Math.ceil(ttlMs * 1000), this.doorbell.id, bytes(key), bytes(owner)]);
    return matchedRows(header as MySqlResultHeader) === 1;
  }

  async release(key: string, owner: string, hold?: HoldKind): Promise<boolean> {
    if (permitsOf(hold) > 1) return this.semaphores.release(key, owner);
    const queued = this.waiters.isQueued(owner);
    this.waiters.forget(owner);
    const k = bytes(key);
    const o = bytes(owner);
    try {
      // A holder nobody waits for: the one-statement delete. Else (a waiter leaving, waiters to hand
      // the key to, a row not ours or expired): the procedure — at once for a key seen busy lately.
      if (!queued && !this.waiters.recentlyBusy(key)) {
        const [header] = await this.queries.call('release', key, this.sql.fastRelease, [k, o]);
        if ((header as MySqlResultHeader).affectedRows === 1) return true;
        this.waiters.busy(key);
      }
      const row = firstRow(await this.queries.call('release', key, this.sql.release, [k, o, this.doorbell.id]));
      this.wake(row.wake, row.body);
      return Number(row.held) === 1;
    } catch (error) {
      // Unanswered: our row or queue entry may still be there, and a queue entry at the head could
      // be handed the key nobody will use. Retry in the background while such an entry can live.
      this.retryRelease(key, owner, performance.now() + this.heartbeatMs * 3, 100);
      throw error;
    }
  }

  /** Every `delayMs` (at most 15 tries in 1.5 s); owner-checked, so never another owner's key; none after close(). */
  private retryRelease(key: string, owner: string, until: number, delayMs: number): void {
    retryInBackground(() => this.closed, until, delayMs, async () => {
      const row = firstRow(await this.queries.call('release', key, this.sql.release, [bytes(key), bytes(owner), this.doorbell.id]));
      this.wake(row.wake, row.body);
    });
  }

  async inspect(key: string): Promise<HeldLock | null> {
    refuseUnstorable(key, `${this.name} backend, inspect(${JSON.stringify(key)})`);
    const row = firstRow(await this.queries.call('inspect', key, this.sql.inspect, [bytes(key)]));
    if (row.token === undefined) return null;
    if (text(row.owner) === SEMAPHORE_MARK) return this.semaphores.inspect(key);
    return { remainingMs: Number(row.remaining_ms), waiters: Number(row.waiters), token: BigInt(text(row.token)), owner: text(row.owner) };
  }

  async listKeys(prefix: string, max: number): Promise<string[]> {
    const rows = allRows(await this.queries.call('listKeys', undefined, this.sql.listKeys, [prefixPattern(prefix), max]));
    return rows.map((row) => text(row.lock_key));
  }

  /** The holder's process is told through its doorbell (or at its next extend, if it has none). */
  async forceRelease(key: string): Promise<string | undefined> {
    refuseUnstorable(key, `${this.name} backend, forceRelease(${JSON.stringify(key)})`);
    const row = firstRow(await this.queries.call('forceRelease', key, this.sql.forceRelease, [bytes(key), this.doorbell.id]));
    this.wake(row.wake, row.body);
    this.wake(row.lost, row.lost_body);
    this.ringAll(row.rings);
    return row.owner === null || row.owner === undefined ? undefined : text(row.owner);
  }

  /** `SELECT 1` within `timeoutMs`, counting the wait for a connection. */
  ping(timeoutMs: number): Promise<void> {
    return this.queries.ping(timeoutMs);
  }

  /** Our connections never hold the process: the doorbell's is unref'd, and the pool's are (see mysql-client.factory.ts). */
  holdProcess(_hold: boolean): void {}

  /**
   * Unregisters the doorbell and ends a pool we opened. Our sockets are unref'd, so a timer holds the
   * process until that is done (at most the command timeout).
   */
  async close(): Promise<void> {
    this.closed = true;
    const limitMs = this.config.commandTimeoutMs ?? MYSQL_DEFAULTS.commandTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, limitMs)));
    try {
      await Promise.race([
        (async () => {
          await this.doorbell.close();
          if (this.config.ownsPool) await this.pool.end();
        })(),
        bound,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A procedure's answer named a listener to wake with `body`: ours is told here, another's is rung (it reads its mail). */
  private wake(listener: unknown, body: unknown): void {
    const id = Number(listener ?? 0);
    if (!id || body === null || body === undefined) return;
    if (id === this.doorbell.id) this.mail(text(body));
    else this.doorbell.ring(id);
  }

  /** Ring every listener of a procedure's comma-separated list (ours too: a semaphore mails our own waiters). */
  private ringAll(rings: unknown): void {
    if (rings === null || rings === undefined) return;
    for (const id of text(rings).split(',')) if (/^\d+$/.test(id)) this.doorbell.ring(Number(id), true);
  }

  /** A mail line: a hand-off "<owner> <ms> <token>" or a forced release "!lost <owner>". */
  private mail(body: string): void {
    if (body.startsWith(SEMAPHORE_TURN)) return this.semaphores.turns.wake(body.slice(SEMAPHORE_TURN.length));
    if (body.startsWith(LOST)) {
      const owner = body.slice(LOST.length);
      // A hand-off to it not yet started on is void too (the key went on to the next waiter).
      this.waiters.revokeHandOff(owner);
      this.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
      return;
    }
    const [owner, ms, token] = body.split(' ');
    this.waiters.handedOff(owner, Number(ms) || 0, token && /^\d+$/.test(token) ? BigInt(token) : undefined);
  }

  /** The clean-up of an acquire whose answer never came: an owner-checked release. */
  private cleanup(key: string, owner: string): () => void {
    return () => void this.release(key, owner).catch(() => undefined);
  }
}
