import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import pg from 'pg';
import { DistributedLockError, EtcdFence, InvalidLockOptionsError, LeaseLostError, PgFence, RedisFence, StaleFencingTokenError } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { closablePool } from '../harness/pg-pool.js';
import { PostgresServer, type PgSettings } from '../harness/postgres.mjs';

describe('fences under composition: nested correctness leases and the implicit token', () => {
  let a: LockApp;
  let b: LockApp;
  let etcd: Etcd3;

  beforeAll(async () => {
    a = await startLockApp({ etcd: { hosts: etcdHosts() } });
    b = await startLockApp({ etcd: { hosts: etcdHosts() } });
    etcd = new Etcd3({ hosts: etcdHosts() });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    etcd.close();
  });

  it('the outer lease runs out while a nested acquisition waits: the nested wait stops, nothing stale is written, the other holder\'s value survives', async () => {
    const acct1 = uniqueKey('acct:1');
    const acct2 = uniqueKey('acct:2');
    const fenceA = new EtcdFence(etcd, { leases: a.locks });
    const fenceB = new EtcdFence(etcd, { leases: b.locks });
    // B holds acct:2, so A waits for it while holding acct:1.
    const bHoldsAcct2 = await b.locks.acquire(acct2, { purpose: 'correctness', ttl: 10_000 });
    let staleWrite: unknown = 'not attempted';
    let aHoldsAcct1!: () => void;
    const aHolds = new Promise<void>((resolve) => (aHoldsAcct1 = resolve));
    const aDone = a.locks
      .using(acct1, { purpose: 'correctness', ttl: 1_500 }, async () => {
        aHoldsAcct1();
        await a.locks.using(acct2, { purpose: 'correctness', ttl: 10_000, wait: 15_000 }, async () => {
          staleWrite = await fenceA.write(acct1, 'A (stale)').catch((e: unknown) => e);
        });
      })
      .catch((e: unknown) => e);
    await aHolds;
    // acct:1 expires at A (~1.5 s); B takes it and writes through the fence: acknowledged.
    await b.locks.using(acct1, { purpose: 'correctness', ttl: 10_000, wait: 5_000 }, async () => {
      await fenceB.write(acct1, 'B');
    });
    await bHoldsAcct2.release(); // A would now get acct:2, with a token newer than B's acct:1 token
    expect(await aDone).toBeInstanceOf(LeaseLostError); // …but its wait stopped when acct:1 was lost
    expect(staleWrite).toBe('not attempted');
    expect(await etcd.get(`fence/${encodeURIComponent(acct1)}`).string()).toBe('B');
  });

  it('a write under a nested lease for the outer lease\'s resource is refused once the outer lease was lost; the other holder\'s value survives', async () => {
    const acct1 = uniqueKey('acct:1');
    const acct2 = uniqueKey('acct:2');
    const fenceA = new EtcdFence(etcd, { leases: a.locks });
    const fenceB = new EtcdFence(etcd, { leases: b.locks });
    let staleWrite: unknown = 'not attempted';
    let aInside!: () => void;
    const inside = new Promise<void>((resolve) => (aInside = resolve));
    let bWrote!: () => void;
    const written = new Promise<void>((resolve) => (bWrote = resolve));
    const aDone = a.locks.using(acct1, { purpose: 'correctness', ttl: 1_500 }, async (outer) => {
      await a.locks.using(acct2, { purpose: 'correctness', ttl: 10_000 }, async () => {
        aInside();
        await new Promise((resolve) => outer.signal.addEventListener('abort', resolve, { once: true }));
        await written;
        staleWrite = await fenceA.write(acct1, 'A (stale)').catch((e: unknown) => e);
      });
    });
    await inside;
    await b.locks.using(acct1, { purpose: 'correctness', ttl: 10_000, wait: 5_000 }, async () => {
      await fenceB.write(acct1, 'B');
    });
    bWrote();
    await aDone;
    expect(staleWrite).toBeInstanceOf(DistributedLockError);
    expect(staleWrite).toBeInstanceOf(LeaseLostError);
    expect(await etcd.get(`fence/${encodeURIComponent(acct1)}`).string()).toBe('B');
  });

  it('with several correctness leases in context, the implicit token is the one of the lease on the same key', async () => {
    const k1 = uniqueKey('acct:1');
    const k2 = uniqueKey('acct:2');
    const fence = new EtcdFence(etcd, { leases: a.locks });
    await a.locks.using(k1, { purpose: 'correctness' }, async (l1) => {
      await a.locks.using(k2, { purpose: 'correctness' }, async (l2) => {
        expect(l2.token! > l1.token!).toBe(true);
        await fence.write(k1, 'one');
        await fence.write(k2, 'two');
        expect(await fence.fence(k1)).toBe(l1.token);
        expect(await fence.fence(k2)).toBe(l2.token);
      });
    });
  });

  it('with several correctness leases and none on the resource\'s key, the implicit token is refused (pass one)', async () => {
    const k1 = uniqueKey('x');
    const k2 = uniqueKey('y');
    const other = uniqueKey('resource');
    const fence = new EtcdFence(etcd, { leases: a.locks });
    await a.locks.using(k1, { purpose: 'correctness' }, async (l1) => {
      await a.locks.using(k2, { purpose: 'correctness' }, async () => {
        const error = await fence.write(other, 'v').catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidLockOptionsError);
        expect((error as InvalidLockOptionsError).field).toBe('token');
        expect(await fence.fence(other)).toBeUndefined();
        await fence.write(other, 'v', l1.token); // an explicit token is the caller's choice
        expect(await fence.fence(other)).toBe(l1.token);
      });
    });
  });

  it('the implicit token comes only from the lease on the resource\'s lock key (lockKey maps one to the other)', async () => {
    const k = uniqueKey('sku:1');
    const resource = uniqueKey('stock/1');
    const plain = new EtcdFence(etcd, { leases: a.locks });
    const mapped = new EtcdFence(etcd, { leases: a.locks, lockKey: (key) => (key === resource ? k : key) });
    await a.locks.using(k, { purpose: 'correctness' }, async (lease) => {
      const error = await plain.write(resource, 'v').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as InvalidLockOptionsError).field).toBe('token');
      expect(await plain.fence(resource)).toBeUndefined();
      await mapped.write(resource, 'v');
      expect(await mapped.fence(resource)).toBe(lease.token);
    });
  });

  it('a lease taken with acquire() is not in the async context: a nested using() on another key does not lend its token', async () => {
    const acct = uniqueKey('acct');
    const audit = uniqueKey('audit');
    const fence = new EtcdFence(etcd, { leases: a.locks });
    await using lease = await a.locks.acquire(acct, { purpose: 'correctness' });
    await a.locks.using(audit, { purpose: 'correctness' }, async () => {
      const error = await fence.write(acct, 'v').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      await fence.write(acct, 'v', lease.token); // explicit: the caller names the protecting lease
    });
    expect(await fence.fence(acct)).toBe(lease.token);
  });

  it('a LeaseSource with only current() never lends the innermost lease\'s token to another key', async () => {
    const k1 = uniqueKey('outer');
    const k2 = uniqueKey('inner');
    const fence = new EtcdFence(etcd, { leases: { current: () => a.locks.current() } });
    await a.locks.using(k1, { purpose: 'correctness' }, async () => {
      await a.locks.using(k2, { purpose: 'correctness' }, async (inner) => {
        await expect(fence.write(k1, 'v')).rejects.toBeInstanceOf(InvalidLockOptionsError);
        await fence.write(k2, 'v');
        expect(await fence.fence(k2)).toBe(inner.token);
      });
    });
  });

  it('EtcdFence refuses tokens of 10^20 and more (it compares 20-digit values): the fence never goes down', async () => {
    const key = uniqueKey('big');
    const fence = new EtcdFence(etcd);
    await fence.write(key, 'max', 10n ** 20n - 1n);
    const error = await fence.write(key, 'over', 10n ** 20n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    await expect(fence.write(key, 'lower', 2n * 10n ** 19n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.fence(key)).toBe(10n ** 20n - 1n);
  });
});

describe('fence keys with lone surrogates are refused, never collided', () => {
  let redis: Redis;
  let etcd: Etcd3;
  beforeAll(() => {
    redis = new Redis(redisUrl());
    etcd = new Etcd3({ hosts: etcdHosts() });
  });
  afterAll(() => {
    redis.disconnect();
    etcd.close();
  });

  it.each(['k\uD800', 'k\uDC00', '\uDFFFx'])('%j on RedisFence and EtcdFence: InvalidLockOptionsError naming key', async (key) => {
    for (const fence of [new RedisFence(redis), new EtcdFence(etcd)]) {
      for (const op of [() => fence.write(key, 'v', 5n), () => fence.read(key, 5n), () => fence.fence(key)]) {
        const error = await op().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(InvalidLockOptionsError);
        expect((error as InvalidLockOptionsError).field).toBe('key');
      }
    }
    // The well-formed neighbour is untouched by the refused calls.
    expect(await new RedisFence(redis).fence('k\uFFFD')).toBeUndefined();
  });
});

describe('PgFence on awkward tables', () => {
  let server: PgSettings;
  let pool: pg.Pool;
  let endPool: () => Promise<void>;

  beforeAll(async () => {
    server = PostgresServer.fromEnv() ?? (await PostgresServer.start());
    ({ pool, end: endPool } = closablePool(server));
    await pool.query('DROP TABLE IF EXISTS dup_rows, nullable_fence');
    await pool.query('CREATE TABLE dup_rows (id text, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)');
    await pool.query('CREATE TABLE nullable_fence (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint)');
  }, 60_000);
  afterAll(async () => {
    await endPool?.();
    await server?.stop();
  });

  it('an id that matches two rows changes nothing and says the id is not unique', async () => {
    const fence = new PgFence({ table: 'dup_rows' });
    await pool.query("INSERT INTO dup_rows (id, balance) VALUES ('d', 1), ('d', 2)");
    const error = await fence.update(pool, 'd', { balance: 99 }, 7n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DistributedLockError);
    expect(error).not.toBeInstanceOf(StaleFencingTokenError);
    expect((error as Error).message).toMatch(/unique/);
    const rows = (await pool.query("SELECT balance, fence FROM dup_rows WHERE id = 'd' ORDER BY balance")).rows;
    expect(rows.map((r) => [Number(r.balance), Number(r.fence)])).toEqual([
      [1, 0],
      [2, 0],
    ]);
    await expect(fence.read(pool, 'd', 7n)).rejects.toThrow(/unique/);
  });

  it('a NULL fence is a row no token has touched yet: the first fenced write passes, a staler one is refused', async () => {
    const fence = new PgFence({ table: 'nullable_fence' });
    await pool.query("INSERT INTO nullable_fence (id, balance) VALUES ('n', 1)");
    await fence.update(pool, 'n', { balance: 2 }, 5n);
    await expect(fence.update(pool, 'n', { balance: 3 }, 4n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    await pool.query("INSERT INTO nullable_fence (id, balance) VALUES ('m', 1)");
    expect(Number((await fence.read(pool, 'm', 1n)).fence)).toBe(1);
  });

  it('tokens beyond PostgreSQL\'s bigint are refused before any statement', async () => {
    const fence = new PgFence({ table: 'nullable_fence' });
    const error = await fence.update(pool, 'n', { balance: 9 }, 2n ** 63n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('token');
  });

  it('values that set the fence column themselves are refused before any statement', async () => {
    const fence = new PgFence({ table: 'nullable_fence' });
    const error = await fence.update(pool, 'n', { balance: 9, fence: 999 }, 6n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('values');
    expect(Number((await pool.query("SELECT fence FROM nullable_fence WHERE id = 'n'")).rows[0].fence)).toBe(5);
  });
});

void sleep;
