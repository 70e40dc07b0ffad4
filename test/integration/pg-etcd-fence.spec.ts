import { Etcd3 } from 'etcd3';
import pg from 'pg';
import { EtcdFence, PgFence, StaleFencingTokenError } from '../../lib/index.js';
import { etcdHosts, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { closablePool } from '../harness/pg-pool.js';
import { PostgresServer, type PgSettings } from '../harness/postgres.mjs';

describe('PgFence: the SQL guard, in the caller\'s transaction, on a real PostgreSQL', () => {
  let server: PgSettings;
  let pool: pg.Pool;
  let endPool: () => Promise<void>;
  const fence = new PgFence({ table: 'accounts' });

  beforeAll(async () => {
    server = PostgresServer.fromEnv() ?? (await PostgresServer.start());
    ({ pool, end: endPool } = closablePool(server));
    await pool.query('DROP TABLE IF EXISTS accounts');
    await pool.query('CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)');
  }, 60_000);
  afterAll(async () => {
    await endPool?.(); // waits for every connection to close before the server stops
    await server?.stop();
  });

  const balance = async (id: string): Promise<number> => Number((await pool.query('SELECT balance FROM accounts WHERE id = $1', [id])).rows[0].balance);

  it('after an update with token 34, one with 33 throws and changes nothing', async () => {
    const id = uniqueKey('acct');
    await pool.query('INSERT INTO accounts (id, balance) VALUES ($1, 0)', [id]);
    await fence.update(pool, id, { balance: 100 }, 34n);
    const error = await fence.update(pool, id, { balance: 1 }, 33n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleFencingTokenError);
    expect((error as StaleFencingTokenError).fence).toBe(34n);
    expect(await balance(id)).toBe(100);
    await fence.update(pool, id, { balance: 101 }, 34n); // the same holder again
    expect(await balance(id)).toBe(101);
  });

  it('runs inside the caller\'s transaction: a rollback undoes the write and the fence', async () => {
    const id = uniqueKey('tx');
    await pool.query('INSERT INTO accounts (id, balance) VALUES ($1, 5)', [id]);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await fence.update(client, id, { balance: 999 }, 50n);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
    expect(await balance(id)).toBe(5);
    await fence.update(pool, id, { balance: 6 }, 10n); // fence was rolled back to 0: 10 passes
  });

  it('a fenced read raises the fence: a read-modify-write by a superseded holder is refused', async () => {
    const id = uniqueKey('rmw');
    await pool.query('INSERT INTO accounts (id, balance) VALUES ($1, 10)', [id]);
    const readByA = Number((await fence.read(pool, id, 5n)).balance); // A (5) reads, then stalls
    const readByB = Number((await fence.read(pool, id, 6n)).balance); // B (6) reads the same 10
    await expect(fence.update(pool, id, { balance: readByA + 1 }, 5n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    await fence.update(pool, id, { balance: readByB + 2 }, 6n);
    expect(await balance(id)).toBe(12);
  });

  it('compares tokens above 2^53 exactly, and says so when the row does not exist', async () => {
    const id = uniqueKey('big');
    await pool.query('INSERT INTO accounts (id, balance) VALUES ($1, 0)', [id]);
    await fence.update(pool, id, { balance: 1 }, 2n ** 53n + 1n);
    await expect(fence.update(pool, id, { balance: 2 }, 2n ** 53n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    await expect(fence.update(pool, 'no-such-row', { balance: 2 }, 1n)).rejects.toThrow(/no row with id = no-such-row/);
  });

  it('quotes identifiers: a hostile column name is a column name, not SQL', async () => {
    const id = uniqueKey('quote');
    await pool.query('INSERT INTO accounts (id, balance) VALUES ($1, 0)', [id]);
    await expect(fence.update(pool, id, { 'balance" = 0; DROP TABLE accounts; --': 1 }, 1n)).rejects.toThrow(/column/);
    expect(await balance(id)).toBe(0);
  });

  it('writes a column whose name holds a dot: one name, not a table and a column', async () => {
    await pool.query('DROP TABLE IF EXISTS dotted');
    await pool.query('CREATE TABLE dotted (id int PRIMARY KEY, "v.1" text, fence bigint NOT NULL DEFAULT 0)');
    await pool.query('INSERT INTO dotted (id) VALUES (1)');
    const updated = await new PgFence({ table: 'dotted' }).update(pool, 1, { 'v.1': 'kept' }, 1n);
    expect(updated['v.1']).toBe('kept');
  });
});

describe('EtcdFence: the txn guard on a real etcd', () => {
  let client: Etcd3;
  let app: LockApp;
  let fence: EtcdFence;

  beforeAll(async () => {
    client = new Etcd3({ hosts: etcdHosts() });
    app = await startLockApp({ etcd: { hosts: etcdHosts() } });
    fence = new EtcdFence(client, { leases: app.locks });
  });
  afterAll(async () => {
    await app.close();
    client.close();
  });

  it('refuses a lower token and keeps the value; an equal token passes; the fence raises on read', async () => {
    const key = uniqueKey('doc');
    await fence.write(key, 'v34', 34n);
    await expect(fence.write(key, 'v33', 33n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.read(key, 34n)).toBe('v34');
    await fence.write(key, 'v34b', 34n);
    expect(await fence.read(key, 40n)).toBe('v34b');
    await expect(fence.write(key, 'late', 39n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.fence(key)).toBe(40n);
    await fence.write(key, 'big', 2n ** 60n);
    await expect(fence.write(key, 'smaller', 2n ** 59n)).rejects.toBeInstanceOf(StaleFencingTokenError);
  });

  it('uses the current etcd lease\'s token, and refuses the late write of a holder that was taken over', async () => {
    const key = uniqueKey('takeover');
    const first = await app.locks.acquire(key, { purpose: 'correctness', ttl: 300 });
    await new Promise((resolve) => first.signal.addEventListener('abort', resolve));
    // The expired holder's key is gone from etcd before the next one asks (without waiting).
    await until(async () => (await app.locks.inspect(key, { purpose: 'correctness' })) === null, 10_000, 'the expired key deleted');
    const token = await app.locks.using(key, { purpose: 'correctness' }, async (lease) => {
      await fence.write(key, 'second');
      return lease.token!;
    });
    expect(await fence.fence(key)).toBe(token);
    await expect(fence.write(key, 'first, late', first.token)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.read(key, token)).toBe('second');
  });
});
