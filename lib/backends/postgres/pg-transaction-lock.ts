import { refuseOtherDialect } from '../../common/sql-dialect.js';
import { checkTransactionLockArgs } from '../../common/transaction-lock.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { LockBusyError } from '../../errors/lock-busy.error.js';
import { errorText } from '../../common/redact.util.js';
import { checkIdentifier, POSTGRES_DEFAULTS } from './postgres-backend.options.js';
import { objectNames, refuseNul } from './postgres-sql.util.js';

/** The connection your transaction runs on: a `pg` `PoolClient` or `Client` after `BEGIN`. */
export interface PgTransactionClient {
  query(text: string, values?: unknown[]): Promise<{ rows: Array<Record<string, unknown>> }>;
  /** A recent pg 8: `'T'` inside a transaction. Used, when present, to refuse a call outside one. */
  getTransactionStatus?(): string | null;
  /**
   * An ORM adapter's (`nest-distributed-lock/orm`): the driver's error inside the ORM's error (Prisma
   * and Drizzle wrap it), where PostgreSQL's SQLSTATE is read. The ORM's error is what is thrown.
   */
  driverErrorOf?(error: unknown): unknown;
}

export interface PgTransactionLockOptions {
  /** The PostgreSQL backend's `schema` (its functions must exist: the module creates them at bootstrap). @default 'public' */
  schema?: string;
  /** The PostgreSQL backend's `tablePrefix`. @default 'nest_lock' */
  tablePrefix?: string;
  /** The backend name errors carry (`LockBusyError.backend`). @default 'postgres' */
  backend?: string;
}

export interface PgTransactionAcquireOptions {
  /**
   * How long to wait, in ms, while another **transaction** holds the key — in PostgreSQL's lock
   * queue (`lock_timeout`), not by polling. A lease holder or a queued lease waiter makes the call
   * busy at once. @default 0
   */
  wait?: number;
}


/**
 * A lock held by **your** transaction, for a critical section that is one transaction: taken on
 * the connection you ran `BEGIN` on, released by PostgreSQL at `COMMIT` or `ROLLBACK` — nothing to
 * release, nothing to renew, nothing left behind by a crash. It excludes the PostgreSQL backend's
 * leases on the same key (`using(key, { purpose: 'correctness' })` on `{ postgres }`) both ways,
 * and its token comes from their sequence, so a `PgFence` orders the two kinds of holder.
 *
 * - **Busy never aborts your transaction**: another holder → `LockBusyError`; the transaction goes
 *   on (retry, or do something else).
 * - **Leases against it**: a lease acquire on a key a transaction holds answers busy at once (it
 *   tries, never waits): `tryAcquire` → `null`, `acquire` waits in the lease queue and is served
 *   within a waiter heartbeat (500 ms) of the commit or rollback.
 * - **It against leases**: a live lease → busy at once, with `retryAfterMs` = the lease's remaining
 *   time; a queued lease waiter → busy too (waiters are served first, so none is starved by a
 *   stream of transactions). `wait` only covers other transactions, in PostgreSQL's lock queue.
 * - **READ COMMITTED only** (PostgreSQL's default): under REPEATABLE READ or SERIALIZABLE the
 *   snapshot predates the wait and could miss a lease granted meanwhile — refused.
 * - Several keys in one transaction: take them in one order everywhere, or PostgreSQL may end one
 *   transaction with `deadlock_detected` (40P01), passed through as is.
 *
 * @example
 * await client.query('BEGIN');
 * const token = await txLock.acquire(client, `account:${id}`, { wait: 2_000 });
 * await fence.update(client, id, { balance }, token);
 * await client.query('COMMIT'); // the lock ends here (or at ROLLBACK)
 */
export class PgTransactionLock {
  private readonly fn: string;
  private readonly backend: string;

  constructor(options: PgTransactionLockOptions = {}) {
    const where = 'new PgTransactionLock()';
    const names = {
      schema: checkIdentifier(options.schema ?? POSTGRES_DEFAULTS.schema, 'schema', where),
      prefix: checkIdentifier(options.tablePrefix ?? POSTGRES_DEFAULTS.tablePrefix, 'tablePrefix', where),
    };
    this.fn = objectNames(names).xactAcquire;
    this.backend = options.backend ?? 'postgres';
  }

  /**
   * Lock `key` until the transaction on `client` ends; resolves to the fencing token (`bigint`,
   * larger than every token issued before it, by leases or transactions). Rejects with
   * `LockBusyError` (the transaction stays usable), `InvalidLockOptionsError` (no transaction,
   * isolation, bad arguments, functions missing) or `LockBackendUnavailableError` (connection lost).
   */
  async acquire(client: PgTransactionClient, key: string, options: PgTransactionAcquireOptions = {}): Promise<bigint> {
    const where = `PgTransactionLock.acquire(${JSON.stringify(key)})`;
    const wait = checkTransactionLockArgs(key, options.wait, where);
    refuseNul(key, where);
    if (typeof client?.query !== 'function') throw new InvalidLockOptionsError('client', 'must be a pg PoolClient or Client', where);
    refuseOtherDialect(client, 'postgres', 'client', where);
    if ('totalCount' in client) {
      throw new InvalidLockOptionsError('client', 'is a Pool: every query may run on another connection. Pass the PoolClient you ran BEGIN on', where);
    }
    const status = client.getTransactionStatus?.();
    if (status === 'I') throw new InvalidLockOptionsError('client', 'is not in a transaction: run BEGIN on it first (the lock ends at COMMIT or ROLLBACK)', where);
    if (status === 'E') throw new InvalidLockOptionsError('client', 'is in a failed transaction: ROLLBACK it first', where);
    const started = performance.now();
    let row: Record<string, unknown>;
    try {
      row = (await client.query(`SELECT status, token, holder_ms FROM ${this.fn}($1, $2)`, [key, wait])).rows[0] ?? {};
    } catch (error) {
      const code = ((client.driverErrorOf?.(error) ?? error) as { code?: unknown } | undefined)?.code;
      if (code === '42883' || code === '3F000' || code === '42P01') {
        throw new InvalidLockOptionsError(
          'tablePrefix',
          `${this.fn} is missing (${errorText(error)}): the PostgreSQL backend creates it at bootstrap — start DistributedLockModule.forRoot({ postgres }) with the same schema and tablePrefix`,
          where,
        );
      }
      // An answer from PostgreSQL (a deadlock, statement_timeout, …) belongs to your transaction: as is.
      if (typeof code === 'string') throw error;
      throw new LockBackendUnavailableError(this.backend, 'transaction acquire', errorText(error), { key, cause: error });
    }
    switch (row.status) {
      case 'acquired':
        return BigInt(String(row.token));
      case 'isolation':
        throw new InvalidLockOptionsError('client', 'the transaction is REPEATABLE READ or SERIALIZABLE: a transaction lock needs READ COMMITTED (its snapshot could miss a lease granted meanwhile)', where);
      case 'busy-transaction':
      case 'busy-lease':
      case 'busy-queue':
        throw new LockBusyError(key, 'correctness', this.backend, performance.now() - started, row.holder_ms == null ? undefined : Number(row.holder_ms));
      default:
        throw new LockBackendUnavailableError(this.backend, 'transaction acquire', `unexpected answer ${JSON.stringify(row)}`, { key });
    }
  }
}
