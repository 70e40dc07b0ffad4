import mysql from 'mysql2/promise';
import { InvalidLockOptionsError, LockBusyError, MySqlFence, MySqlTransactionLock, StaleFencingTokenError } from '../../lib/index.js';
import { MariaDbServer } from '../harness/mariadb.mjs';
import { sleep, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';

// MySqlTransactionLock against a MariaDB 10.11 this spec starts, beside the MySQL backend's leases
// and semaphores on the same keys (the module created the tables and procedures at bootstrap).

type Isolation = 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';

describe("MySqlTransactionLock: a lock held by the caller's transaction, beside the backend's leases", () => {
  let server: MariaDbServer;
  let uri: string;
  let app: LockApp;
  let pool: mysql.Pool;
  let txLock: MySqlTransactionLock;
  const open: mysql.PoolConnection[] = [];

  /** A connection in a transaction. */
  const begin = async (isolation: Isolation = 'READ COMMITTED'): Promise<mysql.PoolConnection> => {
    const conn = await pool.getConnection();
    open.push(conn);
    await conn.query(`SET TRANSACTION ISOLATION LEVEL ${isolation}`);
    await conn.beginTransaction();
    return conn;
  };
  const end = async (conn: mysql.PoolConnection, how: 'commit' | 'rollback' = 'commit'): Promise<void> => {
    await (how === 'commit' ? conn.commit() : conn.rollback());
    open.splice(open.indexOf(conn), 1);
    conn.release();
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
  const refused = async (promise: Promise<unknown>, field: string, text: RegExp): Promise<void> => {
    const error = await promise.then(() => new Error('expected a refusal, got the lock'), (e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).message).toMatch(text);
    expect((error as InvalidLockOptionsError).field).toBe(field);
  };
  const rows = async (sql: string, values: unknown[] = []): Promise<Array<Record<string, unknown>>> => (await pool.query(sql, values))[0] as Array<Record<string, unknown>>;
  const leaseQueue = async (key: string): Promise<number> =>
    Number((await rows('SELECT COUNT(*) AS n FROM nest_lock_queue WHERE key_hash = UNHEX(SHA2(?, 256))', [Buffer.from(key)]))[0].n);

  beforeAll(async () => {
    server = await MariaDbServer.start();
    const admin = await mysql.createConnection({ uri: server.url });
    await admin.query('CREATE DATABASE app');
    await admin.end();
    uri = server.url.replace(/\/[^/]*$/, '/app');
    app = await startLockApp({ mysql: { uri } });
    pool = mysql.createPool({ uri, connectionLimit: 12 });
    txLock = new MySqlTransactionLock({ pool });
    await pool.query('CREATE TABLE tx_accounts (id VARCHAR(200) PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB');
  }, 60_000);
  afterEach(async () => {
    for (const conn of open.splice(0)) {
      await conn.rollback().catch(() => undefined);
      conn.release();
    }
  });
  afterAll(async () => {
    await app?.close();
    await pool?.end();
    await server?.stop();
  });

  it('two transactions exclude each other; the second gets busy (its transaction goes on), waits while asked, and gets a larger token; commit and rollback both release', async () => {
    const key = uniqueKey('tx-mutex');
    const first = await begin();
    const t1 = await txLock.acquire(first, key);
    const second = await begin();
    const refusal = await busy(txLock.acquire(second, key));
    expect(refusal.key).toBe(key);
    expect(((await second.query('SELECT 1 AS one')) as any)[0][0].one).toBe(1);
    // A bounded wait: busy after about `wait` ms.
    let started = performance.now();
    const timedOut = await busy(txLock.acquire(second, key, { wait: 300 }));
    const waited = performance.now() - started;
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(1_500);
    expect(timedOut.waitedMs).toBeGreaterThanOrEqual(290);
    // Waiting: it tries again (every ≤ 100 ms) and takes the key soon after the commit.
    const waiting = txLock.acquire(second, key, { wait: 10_000 });
    await sleep(150);
    started = performance.now();
    await end(first, 'commit');
    const t2 = await waiting;
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(t2).toBeGreaterThan(t1);
    await end(second, 'rollback');
    const third = await begin();
    expect(await txLock.acquire(third, key)).toBeGreaterThan(t2);
    await end(third);
  });

  it('a lease holder makes it busy at once (retryAfterMs), and a transaction makes a lease busy at once — the uncontended insert included', async () => {
    const key = uniqueKey('tx-vs-lease');
    const lease = await app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000 });
    const conn = await begin();
    let started = performance.now();
    const refusal = await busy(txLock.acquire(conn, key, { wait: 3_000 })); // `wait` is for transactions only
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(refusal.retryAfterMs).toBeGreaterThan(3_000);
    expect(refusal.retryAfterMs).toBeLessThanOrEqual(5_000);
    await lease.release();
    const token = await txLock.acquire(conn, key);
    expect(token).toBeGreaterThan(lease.token!);
    started = performance.now();
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await app.locks.acquire(key, { purpose: 'correctness', wait: 300 }).catch((e: unknown) => e)).toBeInstanceOf(LockBusyError);
    // The backend's own uncontended statement, raw: the placeholder refuses it.
    const raw = await pool.query(
      "INSERT INTO nest_lock_held (key_hash, lock_key, owner, expires_at, waiting, listener) VALUES (UNHEX(SHA2(?, 256)), ?, 'raw', UTC_TIMESTAMP(6) + INTERVAL 5 SECOND, 0, 0)",
      [Buffer.from(key), Buffer.from(key)],
    ).catch((e: unknown) => e);
    expect((raw as { errno?: number }).errno).toBe(1062);
    // Neither inspect() nor list() shows a transaction (no lease), as on PostgreSQL; forceRelease() cannot end it.
    expect(await app.locks.inspect(key, { purpose: 'correctness' })).toBeNull();
    expect(await app.locks.forceRelease(key, { purpose: 'correctness' })).toBe(false);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    const other = await app.locks.acquire(uniqueKey('tx-other'), { purpose: 'correctness', wait: 0 });
    await other.release();
    await end(conn, 'rollback');
    const after = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(after).not.toBeNull();
    expect(after.token!).toBeGreaterThan(token);
    await after.release();
  });

  it('a queued lease waiter is served after the transaction (no hand-off: its next re-check), before a transaction that comes after it', async () => {
    const key = uniqueKey('tx-fair');
    const holder = await begin();
    const txToken = await txLock.acquire(holder, key);
    let granted = 0;
    const leaseWaiter = app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000, wait: 10_000 }).then((lease) => {
      granted = performance.now();
      return lease;
    });
    await until(async () => (await leaseQueue(key)) >= 1, 10_000, 'the lease waiter in the queue');
    // A waiter that gives up while the transaction holds the key hands nothing past it.
    await busy(app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000, wait: 300 }));
    await sleep(1_100);
    expect(granted).toBe(0);
    const next = await begin();
    await busy(txLock.acquire(next, key, { wait: 200 }));
    const committed = performance.now();
    await end(holder);
    // The next transaction does not overtake the queued waiter.
    await busy(txLock.acquire(next, key));
    const lease = await leaseWaiter;
    expect(granted - committed).toBeLessThan(1_500); // a waiter re-checks every 500 ms
    expect(lease.token!).toBeGreaterThan(txToken);
    await lease.release();
    // The busy call above locked the key's row in `next`: other transactions wait for it, leases do not.
    const third = await begin();
    await busy(txLock.acquire(third, key));
    const quick = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(quick).not.toBeNull();
    await quick.release();
    expect(await txLock.acquire(next, key)).toBeGreaterThan(quick.token!);
    await end(next);
    await end(third, 'rollback');
  });

  it('REPEATABLE READ: a lock taken before the first read works; a snapshot older than the grant is refused, and the key stays held until the rollback', async () => {
    const key = uniqueKey('tx-snapshot');
    await pool.query('INSERT INTO tx_accounts (id, balance) VALUES (?, 0)', [key]);
    const fresh = await begin('REPEATABLE READ');
    const t1 = await txLock.acquire(fresh, key);
    expect(((await fresh.query('SELECT balance FROM tx_accounts WHERE id = ?', [key])) as any)[0][0].balance).toBe(0);
    await fresh.query('UPDATE tx_accounts SET balance = 5 WHERE id = ?', [key]);
    // Its snapshot taken first: the previous holder's write (above) commits after it.
    const early = await begin('REPEATABLE READ');
    expect(((await early.query('SELECT balance FROM tx_accounts WHERE id = ?', [key])) as any)[0][0].balance).toBe(0);
    await end(fresh);
    await refused(txLock.acquire(early, key), 'client', /snapshot is older than this grant/);
    // What it would have read: the balance before the previous holder's write.
    expect(((await early.query('SELECT balance FROM tx_accounts WHERE id = ?', [key])) as any)[0][0].balance).toBe(0);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    await end(early, 'rollback');
    const lease = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(lease.token!).toBeGreaterThan(t1);
    await lease.release();
  });

  it("innodb_snapshot_isolation (MariaDB 11.6.2+'s default): an old snapshot's refusal says the server rolled the transaction back (review finding: a raw 1020)", async () => {
    const key = uniqueKey('tx-snapshot-isolation');
    await pool.query('INSERT INTO tx_accounts (id, balance) VALUES (?, 0)', [key]);
    const first = await begin();
    await txLock.acquire(first, key);
    const early = await pool.getConnection();
    open.push(early);
    await early.query('SET SESSION innodb_snapshot_isolation = ON');
    await early.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    await early.beginTransaction();
    await early.query('SELECT COUNT(*) FROM nest_lock_xact');
    await end(first);
    await refused(txLock.acquire(early, key), 'client', /rolled the whole transaction back/);
    expect(Number(((await early.query('SELECT @@in_transaction AS t')) as any)[0][0].t)).toBe(0);
    await early.query('SET SESSION innodb_snapshot_isolation = OFF');
    const lease = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(lease).not.toBeNull();
    await lease.release();
  });

  it('waiters behind a transaction keep their order after it: a semaphore waiter is not overtaken by a lease, a lease waiter not by a late uncontended insert (review finding)', async () => {
    const semKey = uniqueKey('tx-sem-order');
    const first = await begin();
    await txLock.acquire(first, semKey);
    const semWaiter = app.locks.acquire(semKey, { purpose: 'correctness', permits: 3, ttl: 5_000, wait: 10_000 });
    await sleep(300);
    await end(first);
    const refusal = await app.locks.tryAcquire(semKey, { purpose: 'correctness' }).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ field: 'permits' }); // a semaphore awaits the key: a plain lock is refused, as always
    const permit = await semWaiter;
    await permit.release();

    const key = uniqueKey('tx-lease-order');
    const second = await begin();
    await txLock.acquire(second, key);
    let late: bigint | undefined;
    const waiter = app.locks.acquire(key, { purpose: 'correctness', ttl: 2_000, wait: 10_000 });
    await until(async () => (await leaseQueue(key)) >= 1, 10_000, 'the lease waiter in the queue');
    await end(second);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness', permits: 3 }).catch((e: unknown) => e)).toMatchObject({ field: 'permits' });
    const quick = await app.locks.tryAcquire(key, { purpose: 'correctness', ttl: 300 });
    late = quick?.token;
    await quick?.release();
    const lease = await waiter;
    expect(late).toBeUndefined();
    await lease.release();
  });

  it('SERIALIZABLE works, and its reads leave the lease path unblocked: a waiting lease is served at the commit', async () => {
    const key = uniqueKey('tx-serializable');
    const conn = await begin('SERIALIZABLE');
    const token = await txLock.acquire(conn, key);
    const waiter = app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000, wait: 10_000 });
    await until(async () => (await leaseQueue(key)) >= 1, 10_000, 'the lease waiter in the queue');
    const committed = performance.now();
    await end(conn);
    const lease = await waiter;
    expect(performance.now() - committed).toBeLessThan(1_500);
    expect(lease.token!).toBeGreaterThan(token);
    await lease.release();
  });

  it('the same key again in the same transaction answers the same token; several keys under READ COMMITTED; under REPEATABLE READ a second key is refused (the first acquire fixed the snapshot)', async () => {
    for (const isolation of ['REPEATABLE READ', 'READ COMMITTED'] as const) {
      const key = uniqueKey('tx-again');
      const conn = await begin(isolation);
      const token = await txLock.acquire(conn, key);
      expect(await txLock.acquire(conn, key)).toBe(token);
      const second = uniqueKey('tx-again-2');
      if (isolation === 'READ COMMITTED') {
        const other = await txLock.acquire(conn, second);
        expect(other).toBeGreaterThan(token);
        expect(await app.locks.tryAcquire(second, { purpose: 'correctness' })).toBeNull();
      } else {
        await refused(txLock.acquire(conn, second), 'client', /one key per REPEATABLE READ transaction/);
      }
      expect(await txLock.acquire(conn, key)).toBe(token);
      await end(conn);
      // After the commit, a new transaction on the same connection is not mistaken for the holder.
      const again = await begin(isolation);
      expect(await txLock.acquire(again, key)).toBeGreaterThan(token);
      await end(again);
    }
  });

  it('ROLLBACK TO SAVEPOINT that undid an acquire: the key again in the transaction never hands it to a queued waiter (review finding: two holders)', async () => {
    const key = uniqueKey('tx-savepoint');
    const conn = await begin();
    await conn.query('INSERT INTO tx_accounts (id, balance) VALUES (?, 0)', [key]); // InnoDB is in the transaction: the savepoint keeps the lock row
    await conn.query('SAVEPOINT s');
    const token = await txLock.acquire(conn, key);
    await conn.query('ROLLBACK TO SAVEPOINT s');
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    let granted: bigint | undefined;
    const waiter = app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000, wait: 10_000 }).then((lease) => {
      granted = lease.token;
      return lease;
    });
    await until(async () => (await leaseQueue(key)) >= 1, 10_000, 'the lease waiter in the queue');
    await busy(txLock.acquire(conn, key)); // waiters first; the transaction still holds its first grant
    await sleep(1_100); // two re-checks of the waiter
    expect(granted).toBeUndefined();
    await end(conn, 'rollback');
    const lease = await waiter;
    expect(lease.token!).toBeGreaterThan(token);
    await lease.release();
  });

  it('a transaction whose connection dies releases the key (the server rolls it back)', async () => {
    const key = uniqueKey('tx-killed');
    const conn = await begin();
    const token = await txLock.acquire(conn, key);
    const [[{ id }]] = (await conn.query('SELECT CONNECTION_ID() AS id')) as any;
    await pool.query(`KILL CONNECTION ${Number(id)}`);
    open.splice(open.indexOf(conn), 1);
    conn.destroy();
    await until(async () => (await app.locks.tryAcquire(key, { purpose: 'correctness' }).then(async (l) => (l ? (await l.release(), true) : false))), 5_000, 'a lease after the kill');
    const next = await begin();
    expect(await txLock.acquire(next, key)).toBeGreaterThan(token);
    await end(next);
  });

  it('semaphores and transactions exclude each other on one key', async () => {
    const key = uniqueKey('tx-sem');
    const conn = await begin();
    const token = await txLock.acquire(conn, key);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness', permits: 3 })).toBeNull();
    const waiting = app.locks.acquire(key, { purpose: 'correctness', permits: 3, ttl: 5_000, wait: 10_000 });
    await sleep(600);
    await end(conn);
    const permit = await waiting;
    expect(permit.token!).toBeGreaterThan(token);
    const other = await begin();
    const refusal = await busy(txLock.acquire(other, key, { wait: 500 }));
    expect(refusal.retryAfterMs).toBeGreaterThan(1_000);
    await permit.release();
    expect(await txLock.acquire(other, key)).toBeGreaterThan(permit.token!);
    await end(other);
  });

  it("orders with the leases through MySqlFence: a late write with the older token is refused, whichever kind held it", async () => {
    const key = uniqueKey('tx-fence');
    const fence = new MySqlFence({ table: 'tx_accounts' });
    await pool.query('INSERT INTO tx_accounts (id, balance) VALUES (?, 0)', [key]);
    const tx = await begin();
    const txToken = await txLock.acquire(tx, key);
    const row = await fence.read(tx, key, txToken);
    await fence.update(tx, key, { balance: Number(row.balance) + 10 }, txToken);
    await end(tx);
    const lease = await app.locks.acquire(key, { purpose: 'correctness', ttl: 5_000 });
    expect(lease.token!).toBeGreaterThan(txToken);
    await fence.update(pool, key, { balance: 110 }, lease.token!);
    expect(await fence.update(pool, key, { balance: 1 }, txToken).catch((e: unknown) => e)).toBeInstanceOf(StaleFencingTokenError);
    await lease.release();
    const tx2 = await begin();
    const newer = await txLock.acquire(tx2, key);
    expect(newer).toBeGreaterThan(lease.token!);
    await fence.update(tx2, key, { balance: 120 }, newer);
    await end(tx2);
    expect(await fence.update(pool, key, { balance: 2 }, lease.token!).catch((e: unknown) => e)).toBeInstanceOf(StaleFencingTokenError);
    expect(Number((await rows('SELECT balance FROM tx_accounts WHERE id = ?', [key]))[0].balance)).toBe(120);
  });

  it('transactions (both isolations) and leases from two apps on one counter: every read-modify-write counted, tokens in grant order', async () => {
    const key = uniqueKey('tx-stress');
    await pool.query('INSERT INTO tx_accounts (id, balance) VALUES (?, 0)', [key]);
    const other = await startLockApp({ mysql: { uri } });
    const grants: bigint[] = [];
    const viaTransaction = async (isolation: Isolation): Promise<boolean> => {
      const conn = await begin(isolation);
      try {
        const token = await txLock.acquire(conn, key, { wait: 50 });
        const [[{ balance }]] = (await conn.query('SELECT balance FROM tx_accounts WHERE id = ?', [key])) as any;
        await sleep(2);
        await conn.query('UPDATE tx_accounts SET balance = ? WHERE id = ?', [Number(balance) + 1, key]);
        grants.push(token);
        await end(conn);
        return true;
      } catch (error) {
        if (!(error instanceof LockBusyError)) throw error;
        await end(conn, 'rollback');
        return false;
      }
    };
    const viaLease = async (locks: LockApp['locks']): Promise<boolean> => {
      const lease = await locks.tryAcquire(key, { purpose: 'correctness', ttl: 5_000 });
      if (!lease) return false;
      const [{ balance }] = await rows('SELECT balance FROM tx_accounts WHERE id = ?', [key]);
      await sleep(2);
      await pool.query('UPDATE tx_accounts SET balance = ? WHERE id = ?', [Number(balance) + 1, key]);
      grants.push(lease.token!);
      await lease.release();
      return true;
    };
    let done = 0;
    const deadline = Date.now() + 8_000;
    const worker = async (step: () => Promise<boolean>): Promise<void> => {
      while (Date.now() < deadline && done < 150) if (await step()) done += 1;
    };
    try {
      await Promise.all([
        worker(() => viaTransaction('REPEATABLE READ')),
        worker(() => viaTransaction('READ COMMITTED')),
        worker(() => viaTransaction('REPEATABLE READ')),
        worker(() => viaLease(app.locks)),
        worker(() => viaLease(other.locks)),
      ]);
    } finally {
      await other.close();
    }
    expect(done).toBeGreaterThanOrEqual(30);
    expect(Number((await rows('SELECT balance FROM tx_accounts WHERE id = ?', [key]))[0].balance)).toBe(done);
    for (let i = 1; i < grants.length; i += 1) expect(grants[i]).toBeGreaterThan(grants[i - 1]);
  }, 30_000);

  it('the sweep removes what ended transactions left (the key is uncontended again), and lock rows unused for a day retire', async () => {
    const key = uniqueKey('tx-sweep');
    const conn = await begin();
    await txLock.acquire(conn, key);
    const k = [Buffer.from(key)];
    expect(Number((await rows('SELECT COUNT(*) AS n FROM nest_lock_xact_grants WHERE key_hash = UNHEX(SHA2(?, 256))', k))[0].n)).toBe(1);
    await pool.query('CALL nest_lock_xact_sweep_v2(1000)');
    // Held: nothing goes.
    expect(Number((await rows("SELECT COUNT(*) AS n FROM nest_lock_held WHERE key_hash = UNHEX(SHA2(?, 256)) AND owner = '!xact'", k))[0].n)).toBe(1);
    await end(conn);
    await pool.query('CALL nest_lock_xact_sweep_v2(1000)');
    expect(Number((await rows('SELECT COUNT(*) AS n FROM nest_lock_held WHERE key_hash = UNHEX(SHA2(?, 256))', k))[0].n)).toBe(0);
    expect(Number((await rows('SELECT COUNT(*) AS n FROM nest_lock_xact_grants WHERE key_hash = UNHEX(SHA2(?, 256))', k))[0].n)).toBe(0);
    const lease = (await app.locks.tryAcquire(key, { purpose: 'correctness' }))!;
    expect(lease).not.toBeNull();
    await lease.release();
    // Lock rows of keys no transaction tried for a day retire — never one a transaction holds.
    const open2 = uniqueKey('tx-retire-held');
    const holder = await begin();
    const heldToken = await txLock.acquire(holder, open2);
    const lockRows = async (k: string): Promise<number> => Number((await rows('SELECT COUNT(*) AS n FROM nest_lock_xact WHERE key_hash = UNHEX(SHA2(?, 256))', [Buffer.from(k)]))[0].n);
    expect(await lockRows(key)).toBe(1);
    await pool.query('UPDATE nest_lock_xact_used SET used_at = UTC_TIMESTAMP(6) - INTERVAL 2 DAY WHERE key_hash IN (UNHEX(SHA2(?, 256)), UNHEX(SHA2(?, 256)))', [Buffer.from(key), Buffer.from(open2)]);
    await pool.query('CALL nest_lock_xact_retire_v1(1000)');
    expect(await lockRows(key)).toBe(0);
    expect(await lockRows(open2)).toBe(1);
    expect(await app.locks.tryAcquire(open2, { purpose: 'correctness' })).toBeNull();
    await end(holder);
    // A retired key's lock row is made anew at the next acquire.
    const again = await begin();
    expect(await txLock.acquire(again, key)).toBeGreaterThan(heldToken);
    expect(await lockRows(key)).toBe(1);
    await end(again);
  });

  it('refuses what cannot hold a lock — no transaction, a Pool, its own pool, bad key or wait, missing tables — naming the field', async () => {
    const key = uniqueKey('tx-refuse');
    const plain = await pool.getConnection();
    try {
      await refused(txLock.acquire(plain, key), 'client', /not in a transaction/);
    } finally {
      plain.release();
    }
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' }).then(async (l) => (l ? (await l.release(), true) : false))).toBe(true);
    await refused(txLock.acquire(pool as never, key), 'client', /Pool/);
    const conn = await begin();
    await refused(txLock.acquire(conn, ''), 'key', /well-formed/);
    await refused(txLock.acquire(conn, 'a\uD800'), 'key', /well-formed/);
    await refused(txLock.acquire(conn, key, { wait: 1.5 }), 'wait', /whole number/);
    await refused(txLock.acquire(conn, key, { wait: -1 }), 'wait', /whole number/);
    await refused(new MySqlTransactionLock({ pool, tablePrefix: 'nothing_here' }).acquire(conn, key), 'tablePrefix', /forRoot\(\{ mysql \}\)/);
    expect(() => new MySqlTransactionLock({ pool: {} as never })).toThrow(/pool/);
    expect(() => new MySqlTransactionLock({ pool, tablePrefix: 'Bad-Prefix' })).toThrow(/tablePrefix/);
    expect(() => new MySqlTransactionLock({ pool, database: 'app; DROP' })).toThrow(/database/);
    // The connection's default database is another one (review finding: a table of that name
    // there was locked instead — two holders): the tables are named in the pool's database.
    await conn.query('USE mysql');
    await pool.query('CREATE TABLE mysql.nest_lock_xact (key_hash BINARY(32) PRIMARY KEY, mark BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB');
    await pool.query("INSERT INTO mysql.nest_lock_xact VALUES (UNHEX(SHA2(?, 256)), 0)", [Buffer.from(key)]);
    const elsewhere = await txLock.acquire(conn, key);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    expect(await new MySqlTransactionLock({ pool, database: 'app' }).acquire(conn, key)).toBe(elsewhere);
    await pool.query('DROP TABLE mysql.nest_lock_xact');
    await conn.query('USE app');
    await refused(txLock.acquire(conn, key, null as never), 'options', /object/);
    // A lock pool with autocommit off: refused before anything is written (review finding: its uncommitted row stalled others).
    const noAutocommit = mysql.createPool({ uri, connectionLimit: 2 });
    noAutocommit.on('connection', (c) => c.query('SET autocommit = 0'));
    try {
      await refused(new MySqlTransactionLock({ pool: noAutocommit }).acquire(conn, uniqueKey('tx-autocommit')), 'pool', /autocommit/);
    } finally {
      await noAutocommit.end();
    }
    // The transaction is still usable after every refusal.
    expect(await txLock.acquire(conn, key)).toBeGreaterThan(0n);
    await end(conn);
  });

  it('on MySQL (no @@in_transaction): a connection outside a transaction is found by its committed mark and refused; inside one it works', async () => {
    // The same server, answering the lock's pool as MySQL 8 would name itself.
    const asMySql = {
      query: async (options: any) => {
        const answer = (await pool.query(options)) as any;
        for (const set of Array.isArray(answer[0]) ? answer[0] : []) for (const row of Array.isArray(set) ? set : [set]) if (row && 'version' in row) row.version = '8.4.3';
        return answer;
      },
    };
    const mysqlLock = new MySqlTransactionLock({ pool: asMySql as never });
    const key = uniqueKey('tx-mysql8');
    const plain = await pool.getConnection();
    try {
      await refused(mysqlLock.acquire(plain, key), 'client', /not in a transaction/);
    } finally {
      plain.release();
    }
    const conn = await begin();
    const token = await mysqlLock.acquire(conn, key);
    expect(await mysqlLock.acquire(conn, key)).toBe(token);
    expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    await end(conn);
  });
});
