import { checkSqlIdentifier } from '../../common/checks.util.js';
import { errorText } from '../../common/redact.util.js';
import { refuseOtherDialect } from '../../common/sql-dialect.js';
import { checkTransactionLockArgs, MAX_TRANSACTION_WAIT_MS } from '../../common/transaction-lock.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { LockBusyError } from '../../errors/lock-busy.error.js';
import { createHash } from 'node:crypto';
import { withTimeout } from '../backend-call.util.js';
import { ER, errnoOf, q, type MySqlQueryOptions, type MySqlQueryResult } from './mysql-client.interface.js';
import { MYSQL_DEFAULTS } from './mysql-backend.options.js';
import { bytes, firstRow, mysqlNames, refuseUnstorable, text, type MySqlNames } from './mysql-sql.util.js';

/** The connection your transaction runs on (a mysql2 `PoolConnection` or `Connection` after `BEGIN`), or an ORM adapter's client. */
export interface MySqlTransactionClient {
  /** mysql2/promise's `query(sql, values)`: `[rows, fields]` (any `MySqlQueryable` of MySqlFence fits). */
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>;
  /** An ORM adapter's (`nest-distributed-lock/orm`): `'I'` outside a transaction (refused). */
  getTransactionStatus?(): string | null;
  /** An ORM adapter's: the driver's error inside the ORM's, where the server's `errno` is read. */
  driverErrorOf?(error: unknown): unknown;
}

/** Where the lock's own statements run: any mysql2 promise pool (or connection) with autocommit on, on the backend's database. */
export interface MySqlStatementRunner {
  query(options: MySqlQueryOptions): Promise<MySqlQueryResult>;
}

export interface MySqlTransactionLockOptions {
  /**
   * A mysql2 promise pool on the database of the MySQL backend's tables — the module's own pool
   * works (`{ mysql: { pool } }`). The lock's bookkeeping commits there, outside your transaction;
   * it must not be the connection your transaction runs on. Keep a connection of it free for the
   * lock while your transactions hold theirs (a pool your transactions exhaust would wait).
   */
  pool: MySqlStatementRunner;
  /** The MySQL backend's `tablePrefix`. @default 'nest_lock' */
  tablePrefix?: string;
  /**
   * The database of the backend's tables, when your transactions' connections (or `pool`) use
   * another as their default: the lock then names its tables and procedures `database.table`.
   * @default the connection's own (`DATABASE()`)
   */
  database?: string;
  /** The backend name errors carry (`LockBusyError.backend`). @default 'mysql' */
  backend?: string;
  /** How long one statement through `pool` may take before `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

export interface MySqlTransactionAcquireOptions {
  /**
   * How long to keep trying, in ms, while another **transaction** holds the key (tried again every
   * 5–100 ms, no queue). A lease holder or a queued lease waiter makes the call busy at once. @default 0
   */
  wait?: number;
}


/**
 * A lock held by **your** MySQL / MariaDB transaction (MariaDB 10.6+, MySQL 8.0+): taken on the
 * connection you ran `BEGIN` on, released by the server at `COMMIT` or `ROLLBACK` — nothing to
 * release or renew, nothing left by a crash. It excludes the MySQL backend's leases and semaphores
 * on the same key both ways, and its token comes from their counter, so a `MySqlFence` orders both
 * kinds of holder. How (mysql-xact.sql.ts): your transaction locks the key's row of
 * `<prefix>_xact` (`FOR UPDATE SKIP LOCKED`), and a placeholder committed through `pool` keeps
 * leases off the key while that row stays locked.
 *
 * - **Busy never aborts your transaction**: another holder → `LockBusyError`, the transaction goes
 *   on. A call that found the key busy only after locking its row keeps that row until your
 *   transaction ends: other transactions find the key busy meanwhile (leases do not).
 * - **Leases against it**: `tryAcquire` → `null`; `acquire` queues and is served within a waiter
 *   heartbeat (500 ms) of your commit or rollback.
 * - **It against leases**: a live lease → busy at once (`retryAfterMs`: what is left of it); a
 *   queued lease waiter → busy too (waiters first). `wait` covers other transactions only.
 * - **Isolation**: READ COMMITTED takes any number of keys at any time. Under REPEATABLE READ (the
 *   default) a transaction's first read fixes its snapshot, so take **one** key, before anything
 *   else: a snapshot older than the grant (an earlier read, an earlier key) would miss the previous
 *   holder's writes, and the call is refused (`InvalidLockOptionsError`, field `client`) — the key
 *   stays locked until you roll back.
 * - The same key again in the same transaction answers the same token.
 *
 * @example
 * await conn.beginTransaction();
 * const token = await txLock.acquire(conn, `account:${id}`, { wait: 2_000 });
 * await fence.update(conn, id, { balance }, token);
 * await conn.commit(); // the lock ends here (or at rollback)
 */
export class MySqlTransactionLock {
  private readonly names: MySqlNames;
  private readonly backend: string;
  private readonly pool: MySqlStatementRunner;
  private readonly timeoutMs: number;
  private readonly database?: string;
  /** The key's committed mark (read through the pool: autocommit, the latest committed). */
  private readonly markSql: string;

  constructor(options: MySqlTransactionLockOptions) {
    const where = 'new MySqlTransactionLock()';
    if (typeof options?.pool?.query !== 'function') throw new InvalidLockOptionsError('pool', 'must be a mysql2 promise pool (query())', where);
    this.pool = options.pool;
    this.names = qualified(mysqlNames(checkSqlIdentifier(options.tablePrefix ?? MYSQL_DEFAULTS.tablePrefix, 'tablePrefix', where)), options.database, where);
    this.backend = options.backend ?? 'mysql';
    this.database = options.database;
    const timeout = options.commandTimeoutMs ?? MYSQL_DEFAULTS.commandTimeoutMs;
    if (!Number.isInteger(timeout) || timeout < 1 || timeout > MAX_TRANSACTION_WAIT_MS) {
      throw new InvalidLockOptionsError('commandTimeoutMs', `must be a whole number of ms from 1 to ${MAX_TRANSACTION_WAIT_MS}, got ${String(timeout)}`, where);
    }
    this.timeoutMs = timeout;
    this.markSql = `SELECT CAST(mark AS CHAR) AS mark FROM ${this.names.xact} WHERE key_hash = UNHEX(SHA2(?, 256))`;
  }

  /**
   * Lock `key` until the transaction on `client` ends; resolves to the fencing token (`bigint`,
   * larger than every token issued before it, by leases or transactions). Rejects with
   * `LockBusyError` (the transaction stays usable), `InvalidLockOptionsError` (no transaction, a
   * snapshot older than the grant, bad arguments, tables missing) or `LockBackendUnavailableError`.
   */
  async acquire(client: MySqlTransactionClient, key: string, options?: MySqlTransactionAcquireOptions): Promise<bigint> {
    const where = `MySqlTransactionLock.acquire(${JSON.stringify(key)})`;
    if (options !== undefined && (typeof options !== 'object' || options === null)) throw new InvalidLockOptionsError('options', 'must be an object ({ wait }) or left out', where);
    const wait = checkTransactionLockArgs(key, options?.wait, where);
    refuseUnstorable(key, where);
    if (typeof client?.query !== 'function') throw new InvalidLockOptionsError('client', 'must be the mysql2 connection you began the transaction on', where);
    refuseOtherDialect(client, 'mysql', 'client', where);
    if (typeof (client as { getConnection?: unknown }).getConnection === 'function') {
      throw new InvalidLockOptionsError('client', 'is a Pool: every query may run on another connection. Pass the connection you began the transaction on', where);
    }
    if (typeof (client as { promise?: unknown }).promise === 'function') {
      throw new InvalidLockOptionsError('client', "is a callback connection of mysql2: pass its promise() wrapper (mysql2/promise)", where);
    }
    if ((client as unknown) === this.pool) throw new InvalidLockOptionsError('client', "is the lock's own pool: pass the connection your transaction runs on", where);
    if (client.getTransactionStatus?.() === 'I') throw new InvalidLockOptionsError('client', 'is not in a transaction: begin one first (the lock ends at commit or rollback)', where);

    const k = bytes(key);
    // In your transaction the key's row is named by its hash, computed here: a constant the server
    // looks up as one row (`key_hash = UNHEX(SHA2(?))` in an UPDATE is a range, whose next-key lock
    // under REPEATABLE READ would also lock the gap after the row and stall other keys' inserts).
    const hash = createHash('sha256').update(k).digest();
    const started = performance.now();
    const busy = (holderMs?: unknown): LockBusyError =>
      new LockBusyError(key, 'correctness', this.backend, performance.now() - started, holderMs === null || holderMs === undefined ? undefined : Number(holderMs));
    for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
      const state = await this.run('transaction prepare', key, `CALL ${this.names.xactPrepare}(?)`, [k]);
      if (state.status === 'busy-lease' || (state.status === 'busy-queue' && Number(state.xact) !== 1)) throw busy(state.holder_ms);
      if (String(state.autocommit) !== '1') {
        throw new InvalidLockOptionsError('pool', "has autocommit off: the lock's bookkeeping would never commit. Leave autocommit on (the default)", where);
      }
      const mariadb = /mariadb/i.test(String(state.version));
      // In your transaction the tables are named in the pool's database: your connection's default may be another.
      const [xact, grants] = this.database ? [this.names.xact, this.names.xactGrants] : [inDatabase(state.db, this.names.xact), inDatabase(state.db, this.names.xactGrants)];
      const rows = await this.inTransaction(client, key, where, `SELECT CAST(mark AS CHAR) AS mark, CONNECTION_ID() AS conn${mariadb ? ', @@in_transaction AS in_tx' : ''} FROM ${xact} WHERE key_hash = ? FOR UPDATE SKIP LOCKED`, [hash]);
      if (rows.length === 0) {
        // Another transaction holds the key's lock row (or a lease call looks at it this moment).
        const left = wait - (performance.now() - started);
        if (left <= 0) throw busy();
        await new Promise((resolve) => setTimeout(resolve, Math.min(pause, left)));
        continue;
      }
      if (mariadb && Number(cell(rows[0], 'in_tx', 1)) !== 1) throw notInTransaction(where);
      // A mark this transaction wrote after its own grant is not committed: the pool reads an older
      // one. (A mark newer than the prepare's answer may also have been committed since by the
      // previous holder: asked again, now that nothing can change it.)
      const mine = text(cell(rows[0], 'mark', 0));
      if (mine !== text(state.mark)) {
        const committed = await this.run('transaction acquire', key, this.markSql, [k]);
        if (text(committed.mark) !== mine) return BigInt(mine);
      }
      const claim = await this.run('transaction acquire', key, `CALL ${this.names.xactClaim}(?, ?)`, [k, String(cell(rows[0], 'conn', 1))]);
      if (claim.status !== 'acquired') throw busy(claim.holder_ms);
      const token = text(claim.token);
      const seen = await this.inTransaction(client, key, where, `SELECT 1 AS seen FROM ${grants} WHERE key_hash = ? AND token = ?`, [hash, token]);
      if (seen.length === 0) {
        throw new InvalidLockOptionsError(
          'client',
          "the transaction's snapshot is older than this grant: it would read data older than the key's previous holder wrote. Under REPEATABLE READ a transaction's first read fixes its snapshot (an earlier acquire's own check is one): take one key per REPEATABLE READ transaction, before anything else — or use READ COMMITTED (several keys, any time). Roll back: the key stays locked until then",
          where,
        );
      }
      await this.inTransaction(client, key, where, `UPDATE ${xact} SET mark = ? WHERE key_hash = ?`, [token, hash]);
      if (!mariadb) {
        // MySQL has no @@in_transaction: a mark already committed means the statements committed alone.
        const committed = await this.run('transaction acquire', key, this.markSql, [k]);
        if (text(committed.mark) === token) throw notInTransaction(where);
      }
      return BigInt(token);
    }
  }

  /** One statement through the lock's pool, bounded: its first row. */
  private async run(operation: string, key: string, sql: string, values: unknown[]): Promise<Record<string, unknown>> {
    try {
      const answer = await withTimeout(this.pool.query(q(sql, values)), this.timeoutMs, () => new Error(`no answer within ${this.timeoutMs} ms`));
      return firstRow(answer);
    } catch (error) {
      const errno = errnoOf(error);
      if (errno === ER.NO_SUCH_TABLE || errno === ER.SP_DOES_NOT_EXIST) throw missing(error, this.names, `MySqlTransactionLock.acquire(${JSON.stringify(key)})`);
      throw new LockBackendUnavailableError(this.backend, operation, errorText(error), { key, cause: error });
    }
  }

  /** One statement in the caller's transaction: its rows. A server error belongs to the transaction: passed on as is. */
  private async inTransaction(client: MySqlTransactionClient, key: string, where: string, sql: string, values: unknown[]): Promise<unknown[]> {
    try {
      const [rows] = await client.query(sql, values);
      return Array.isArray(rows) ? rows : [];
    } catch (error) {
      const errno = errnoOf(client.driverErrorOf?.(error) ?? error);
      if (errno === ER.NO_SUCH_TABLE) throw missing(error, this.names, where);
      if (errno === 1020) {
        // innodb_snapshot_isolation (MariaDB 11.6.2+'s default): the locking read met a row changed after the snapshot.
        throw new InvalidLockOptionsError(
          'client',
          "the transaction's snapshot is older than the key's last holder (innodb_snapshot_isolation refused the read, and the server rolled the whole transaction back): begin again and take the lock before the first read, or use READ COMMITTED",
          where,
        );
      }
      if (errno === 1792) throw new InvalidLockOptionsError('client', 'is a READ ONLY transaction: the lock writes its mark in it. Roll back (the key stays locked until then) and begin a read-write transaction', where);
      if (errno !== undefined) throw error;
      throw new LockBackendUnavailableError(this.backend, 'transaction acquire', errorText(error), { key, cause: error });
    }
  }
}

/** The names in `database` (validated), when given. */
function qualified(names: MySqlNames, database: unknown, where: string): MySqlNames {
  if (database === undefined) return names;
  if (typeof database !== 'string' || !/^[A-Za-z0-9_$]{1,64}$/.test(database)) {
    throw new InvalidLockOptionsError('database', `must be a database name of 1 to 64 letters, digits, _ or $, got ${JSON.stringify(database) ?? String(database)}`, where);
  }
  const entries = Object.entries(names).map(([name, value]) => [name, value.startsWith('`') ? `\`${database}\`.${value}` : value]);
  return Object.fromEntries(entries) as unknown as MySqlNames;
}

/** A table of the lock's in the database `db` (the pool's `DATABASE()`). */
function inDatabase(db: unknown, table: string): string {
  if (db === null || db === undefined) return table;
  return `\`${String(Buffer.isBuffer(db) ? db.toString('utf8') : db).replace(/`/g, '``')}\`.${table}`;
}

/** A column of a row, by name (or by position when the connection answers rows as arrays). */
function cell(row: unknown, name: string, index: number): unknown {
  return Array.isArray(row) ? row[index] : (row as Record<string, unknown> | undefined)?.[name];
}

const notInTransaction = (where: string): InvalidLockOptionsError =>
  new InvalidLockOptionsError('client', 'is not in a transaction: begin one on it first (autocommit would end the lock with the statement)', where);

function missing(error: unknown, names: MySqlNames, where: string): InvalidLockOptionsError {
  return new InvalidLockOptionsError(
    'tablePrefix',
    `${names.xact} or its procedures are missing (${errorText(error)}): the MySQL backend creates them at bootstrap — start DistributedLockModule.forRoot({ mysql }) with the same tablePrefix`,
    where,
  );
}
