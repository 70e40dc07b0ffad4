import type pg from 'pg';
import { InvalidLockOptionsError, LockBusyError, PgFence, PgTransactionLock, StaleFencingTokenError } from '../../lib/index.js';
import { closablePool } from '../harness/pg-pool.js';
import { PgBouncer } from '../harness/pgbouncer.mjs';
import { PostgresServer } from '../harness/postgres.mjs';
import { sleep, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';

// PgTransactionLock against a real PostgreSQL this spec starts, beside the PostgreSQL backend's
// leases on the same keys (the module created the functions at bootstrap).

describe('PgTransactionLock: a lock held by the caller\'s transaction, beside the backend\'s leases', () => {
  let server: PostgresServer;
  let app: LockApp;
  let pool: pg.Pool;
  let endPool: () => Promise<void>;
  const txLock = new PgTransactionLock();
  const open: pg.PoolClient[] = [];

  /** A connection in a transaction (READ COMMITTED unless asked). */
  const begin = async (isolation = 'READ COMMITTED'): Promise<pg.PoolClient> => {
    const client = await pool.connect();
    open.push(client);
    await client.query(`BEGIN ISOLATION LEVEL ${isolation}`);
    return client;
  };
  const end = async (client: pg.PoolClient, how: 'COMMIT' | 'ROLLBACK' = 'COMMIT'): Promise<void> => {
    await client.query(how);
    open.splice(open.indexOf(client), 1);
    client.release();
  };
  const busy = (promise: Promise<unknown>): Promise<LockBusyError> =>
    promise.then(
      () => {
        throw new Error('expected LockBusyError, got the lock');
      },
      (error: unknown) => {
        expect(error).toBeInstanceOf(LockBusyError);
        return error as LockBusyError;
      },
    );

  /** Transactions waiting in PostgreSQL's lock queue for a key's transaction (advisory) lock. */
  const txWaiting = async (): Promise<number> =>
    (await pool.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0].n;
  /** Lease waiters queued for `key` (read from the table: a transaction holding the key has no lease row for inspect()). */
  const leaseQueue = async (key: string): Promise<number> =>
    (await pool.query('SELECT count(*)::int AS n FROM nest_lock_queue WHERE key = $1', [key])).rows[0].n;

  beforeAll(async () => {
    server = await PostgresServer.start();
    app = await startLockApp({ postgres: { connectionString: server.url } });
    ({ pool, end: endPool } = closablePool(server));
    await pool.query('CREATE TABLE tx_accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)');
  }, 60_000);
  afterEach(async () => {
    for (const client of open.splice(0)) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
    }
  });
  afterAll(async () => {
    await app?.close();
    await endPool?.();
    await server?.stop();
  });

  it('two transactions exclude each other; the second waits in the lock queue (no polling) and gets a larger token; commit and rollback both release', async () => {
    const key = uniqueKey('tx-mutex');
    const first = await begin();
    const t1 = await txLock.acquire(first, key);
    const second = await begin();
    const refused = await busy(txLock.acquire(second, key));
    expect(refused.key).toBe(key);
    // The busy answer left the transaction usable (a RAISE would have aborted it).
    expect((await second.query('SELECT 1 AS one')).rows[0].one).toBe(1);
    // A bounded wait: busy after about `wait` ms.
    let started = performance.now();
    const timedOut = await busy(txLock.acquire(second, key, { wait: 300 }));
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(1_500);
    expect(timedOut.waitedMs).toBeGreaterThanOrEqual(290);
    // Waiting: served at the commit, not at a re-check.
    const waiting = txLock.acquire(second, key, { wait: 10_000 });
    // It waits in the lock queue before the commit.
    await until(async () => (await txWaiting()) >= 1, 10_000, 'the second transaction in the lock queue');
    started = performance.now();
    await end(first, 'COMMIT');
    const t2 = await waiting;
    const handOffMs = performance.now() - started;
    if (process.env.PG_DEBUG) console.log(`commit → waiting transaction granted: ${handOffMs.toFixed(1)} ms`);
    expect(handOffMs).toBeLessThan(250);
    expect(t2).toBeGreaterThan(t1);
    await end(second, 'ROLLBACK');
    // The rollback released it too.
    const third = await begin();
    expect(await txLock.acquire(third, key)).toBeGreaterThan(t2);
    await end(third);
  });

  it('a lease holder makes it busy at once (retryAfterMs, the transaction goes on), and a transaction makes a lease busy at once', async () => {
    const key = uniqueKey('tx-vs-lease');
    const lease = await app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000 });
    const client = await begin();
    let started = performance.now();
    const refused = await busy(txLock.acquire(client, key, { wait: 3_000 })); // `wait` is for transactions only
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(refused.retryAfterMs).toBeGreaterThan(3_000);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(5_000);
    await lease.release();
    // Same transaction, after the busy answer: it takes the key now, with a newer token.
    const token = await txLock.acquire(client, key);
    expect(token).toBeGreaterThan(lease.token!);
    // The other way round: the lease call tries and answers, it never waits for the transaction.
    started = performance.now();
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    const leaseBusyMs = performance.now() - started;
    if (process.env.PG_DEBUG) console.log(`tryAcquire while a transaction holds: ${leaseBusyMs.toFixed(1)} ms`);
    expect(leaseBusyMs).toBeLessThan(1_000);
    const busyLease = await app.locks.acquire(key, { purpose: 'correctness', wait: 300 }).catch((e: unknown) => e);
    expect(busyLease).toBeInstanceOf(LockBusyError);
    // Other keys' leases are not held up by the transaction.
    const other = await app.locks.acquire(uniqueKey('tx-other'), { purpose: 'correctness', wait: 0 });
    await other.release();
    await end(client, 'ROLLBACK');
    const after = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(after).not.toBeNull();
    expect(after.token!).toBeGreaterThan(token);
    await after.release();
  });

  it('a queued lease waiter is served after the transaction, before a transaction that waited for it (no starvation)', async () => {
    const key = uniqueKey('tx-fair');
    const holder = await begin();
    await txLock.acquire(holder, key);
    const leaseWaiter = app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000, wait: 10_000 });
    await until(async () => (await leaseQueue(key)) >= 1, 10_000, 'the lease waiter in the queue');
    const next = await begin();
    const nextTx = txLock.acquire(next, key, { wait: 10_000 }).then(
      (token) => ({ token }),
      (error: unknown) => ({ error }),
    );
    // The next transaction waits for the holder's lock before the holder ends.
    await until(async () => (await txWaiting()) >= 1, 10_000, 'the next transaction in the lock queue');
    const committed = performance.now();
    await end(holder);
    const answer = await nextTx;
    expect((answer as { error?: unknown }).error).toBeInstanceOf(LockBusyError); // it did not overtake the waiter
    const lease = await leaseWaiter;
    const servedMs = performance.now() - committed;
    if (process.env.PG_DEBUG) console.log(`commit → queued lease granted: ${servedMs.toFixed(1)} ms`);
    expect(servedMs).toBeLessThan(1_500); // a waiter re-checks every 500 ms
    await lease.release();
    expect(await txLock.acquire(next, key)).toBeGreaterThan(lease.token!);
    await end(next);
  });

  it('a waiter that gives up while a transaction holds the key hands nothing past the transaction (review finding: two holders)', async () => {
    // A holder that died left its row, expired; a transaction takes the key; two lease waiters
    // queue behind it, and one gives up. Its release used to hand the key to the other waiter while
    // the transaction still held it.
    const key = uniqueKey('tx-giveup');
    await pool.query('SELECT acquired FROM nest_lock_acquire_v2($1, $2, 200, false, 1500)', [key, 'crashed-holder']);
    await sleep(300);
    const tx = await begin();
    const txToken = await txLock.acquire(tx, key);
    let granted = 0;
    const first = app.locks.acquire(key, { purpose: 'correctness', ttl: 10_000, wait: 20_000 }).then((lease) => {
      granted = performance.now();
      return lease;
    });
    // The first waiter is queued before the second one comes (and gives up).
    await until(async () => (await leaseQueue(key)) >= 1, 10_000, 'the first waiter in the queue');
    await busy(app.locks.acquire(key, { purpose: 'correctness', ttl: 10_000, wait: 300 }));
    await sleep(1_200); // past two re-checks of the first waiter
    expect(granted).toBe(0);
    // Nor on the database: no live lease row beside the transaction.
    expect((await pool.query('SELECT count(*)::int AS n FROM nest_lock_held WHERE key = $1 AND expires_at > clock_timestamp()', [key])).rows[0].n).toBe(0);
    const committed = performance.now();
    await end(tx);
    const lease = await first;
    // Not woken (a transaction sends no hand-off): its next re-check takes the key.
    expect(granted - committed).toBeLessThan(1_100);
    expect(lease.token!).toBeGreaterThan(txToken);
    await lease.release();
  });

  it('its tokens and the leases\' order through PgFence: a late write with the older token is refused, whichever kind held it', async () => {
    const key = uniqueKey('tx-fence');
    const fence = new PgFence({ table: 'tx_accounts' });
    await pool.query('INSERT INTO tx_accounts (id, balance) VALUES ($1, 0)', [key]);
    // A transaction, then a lease: the transaction's token is older.
    const tx = await begin();
    const txToken = await txLock.acquire(tx, key);
    const row = await fence.read(tx, key, txToken);
    await fence.update(tx, key, { balance: Number(row.balance) + 10 }, txToken);
    await end(tx);
    const lease = await app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000 });
    expect(lease.token!).toBeGreaterThan(txToken);
    await fence.update(pool, key, { balance: 110 }, lease.token!);
    const late = await fence.update(pool, key, { balance: 1 }, txToken).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(StaleFencingTokenError);
    // A lease holder that lost its key, then a transaction: the lease's late write is refused.
    await lease.release();
    const tx2 = await begin();
    const newer = await txLock.acquire(tx2, key);
    expect(newer).toBeGreaterThan(lease.token!);
    await fence.update(tx2, key, { balance: 120 }, newer);
    await end(tx2);
    expect(await fence.update(pool, key, { balance: 2 }, lease.token!).catch((e: unknown) => e)).toBeInstanceOf(StaleFencingTokenError);
    expect(Number((await pool.query('SELECT balance FROM tx_accounts WHERE id = $1', [key])).rows[0].balance)).toBe(120);
  });

  it('the README how-to: using() on { postgres } with PgFence read, update and COMMIT in one transaction — concurrent credits from two apps lose nothing', async () => {
    const key = uniqueKey('howto');
    await pool.query('INSERT INTO tx_accounts (id, balance) VALUES ($1, 0)', [key]);
    const other = await startLockApp({ postgres: { connectionString: server.url } });
    try {
      const credit = async (locks: LockApp['locks']): Promise<bigint> => {
        const fence = new PgFence({ table: 'tx_accounts', leases: locks, lockKey: (id) => `account:${id}` });
        return locks.using(`account:${key}`, { purpose: 'correctness', ttl: 5_000, wait: 10_000 }, async (lease) => {
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            const row = await fence.read(client, key); // the token comes from the lease on lockKey(id)
            await sleep(5);
            await fence.update(client, key, { balance: Number(row.balance) + 1 });
            await client.query('COMMIT');
            return lease.token!;
          } catch (error) {
            await client.query('ROLLBACK');
            throw error;
          } finally {
            client.release();
          }
        });
      };
      const tokens = await Promise.all(Array.from({ length: 12 }, (_, i) => credit((i % 2 ? other : app).locks)));
      const { rows } = await pool.query('SELECT balance, fence FROM tx_accounts WHERE id = $1', [key]);
      expect(Number(rows[0].balance)).toBe(12);
      expect(BigInt(rows[0].fence)).toBe(tokens.reduce((a, b) => (a > b ? a : b)));
      expect(new Set(tokens).size).toBe(12);
    } finally {
      await other.close();
    }
  }, 30_000);

  it('works through PgBouncer in transaction mode (everything happens inside the caller\'s transaction)', async () => {
    const bouncer = await PgBouncer.start(server, 'transaction');
    const { pool: pooled, end: endPooled } = closablePool({ ...server, host: '127.0.0.1', port: bouncer.port, stop: async () => undefined });
    const clients: pg.PoolClient[] = [];
    try {
      const key = uniqueKey('tx-bouncer');
      for (let i = 0; i < 2; i++) {
        const client = await pooled.connect();
        clients.push(client);
        await client.query('BEGIN');
      }
      const first = await txLock.acquire(clients[0], key);
      await busy(txLock.acquire(clients[1], key, { wait: 200 }));
      expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
      await clients[0].query('COMMIT');
      expect(await txLock.acquire(clients[1], key)).toBeGreaterThan(first);
      await clients[1].query('COMMIT');
    } finally {
      for (const client of clients) client.release();
      await endPooled();
      await bouncer.stop();
    }
  }, 30_000);

  it('an instance of the previous version (calling _acquire_v1) keeps working beside this one during a rolling deploy', async () => {
    const key = uniqueKey('tx-rolling');
    const old = await pool.query('SELECT acquired, token FROM nest_lock_acquire_v1($1, $2, 5000, false, 1500)', [key, 'old-instance']);
    expect(old.rows[0].acquired).toBe(true);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    expect((await pool.query('SELECT nest_lock_release_v1($1, $2, 1500) AS held', [key, 'old-instance'])).rows[0].held).toBe(true);
    const lease = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(lease.token!).toBeGreaterThan(BigInt(old.rows[0].token));
    await lease.release();
  });

  it('refuses what cannot hold a lock: no transaction, a Pool, REPEATABLE READ, bad wait — naming the field', async () => {
    const key = uniqueKey('tx-refuse');
    const client = await pool.connect();
    try {
      expect(await txLock.acquire(client, key).catch((e: unknown) => e)).toMatchObject({ name: InvalidLockOptionsError.name, field: 'client' });
    } finally {
      client.release();
    }
    expect(await txLock.acquire(pool as never, key).catch((e: unknown) => e)).toMatchObject({ field: 'client' });
    const repeatable = await begin('REPEATABLE READ');
    expect(await txLock.acquire(repeatable, key).catch((e: unknown) => e)).toMatchObject({ field: 'client', message: expect.stringMatching(/READ COMMITTED/) });
    expect((await repeatable.query('SELECT 1 AS one')).rows[0].one).toBe(1);
    expect(await txLock.acquire(repeatable, key, { wait: -1 }).catch((e: unknown) => e)).toMatchObject({ field: 'wait' });
    await end(repeatable, 'ROLLBACK');
    const elsewhere = new PgTransactionLock({ tablePrefix: 'not_created' });
    const tx = await begin();
    expect(await elsewhere.acquire(tx, key).catch((e: unknown) => e)).toMatchObject({ field: 'tablePrefix' });
  });
  it('a committed transaction\'s token is never issued again after a crash, even when the sequence advance was logged by a transaction that rolled back (review finding)', async () => {
    // nextval logs 32 values ahead once per 32 calls; a transaction whose nextval did not log has
    // nothing to flush at COMMIT. If the one that logged rolled back, a kill -9 before the WAL
    // writer flushed used to restart the sequence below tokens already committed.
    const key = uniqueKey('tx-crash-token');
    pool.on('error', () => undefined); // its idle connections die with the server
    for (let round = 0; round < 3; round++) {
      const logCount = async (): Promise<number> => Number((await pool.query('SELECT log_cnt FROM nest_lock_tokens')).rows[0].log_cnt);
      for (let i = 0; i < 40 && (await logCount()) > 0; i++) {
        const t = await begin();
        await txLock.acquire(t, key);
        await end(t);
      }
      await sleep(300); // the WAL writer has flushed everything so far
      const t1 = await begin();
      await txLock.acquire(t1, key); // its nextval logs the next 32 values
      await end(t1, 'ROLLBACK');
      const t2 = await begin();
      const committed = await txLock.acquire(t2, key);
      await end(t2);
      await server.kill();
      await server.launch();
      let after: bigint | undefined;
      for (let i = 0; i < 50 && after === undefined; i++) {
        const lease = await app.locks.tryAcquire(`${key}:after`, { purpose: 'correctness' }).catch(() => undefined);
        if (lease) {
          after = lease.token!;
          await lease.release();
        } else await sleep(100);
      }
      expect(after).toBeDefined();
      expect(after!).toBeGreaterThan(committed);
    }
  }, 60_000);
});
