import mysql from 'mysql2/promise';
import { InvalidLockOptionsError } from '../../lib/index.js';
import { describeSemaphore } from '../harness/semaphore-contract.js';
import { MariaDbServer } from '../harness/mariadb.mjs';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

/** A MariaDB of the spec's own with a database `app`; its URL. */
async function mariadb(): Promise<{ server: MariaDbServer; uri: string }> {
  const server = await MariaDbServer.start();
  const admin = await mysql.createConnection({ uri: server.url });
  await admin.query('CREATE DATABASE app');
  await admin.end();
  return { server, uri: server.url.replace(/\/[^/]*$/, '/app') };
}

// The semaphore contract on MySQL / MariaDB (a server this spec starts), then what only this
// backend can get wrong: plain locks and semaphores meeting on one key's row (the mark), holders
// racing for the last permit, and what is left on the server afterwards.
describeSemaphore({
  backend: 'mysql',
  purpose: 'correctness',
  fencing: true,
  server: async () => {
    const { server, uri } = await mariadb();
    return { options: { mysql: { uri } }, stop: () => server.stop() };
  },
});

describe('MySQL semaphores: the mark, races, leftovers', () => {
  let server: MariaDbServer;
  let uri: string;
  let pool: mysql.Pool;
  const apps: LockApp[] = [];
  beforeAll(async () => {
    ({ server, uri } = await mariadb());
    pool = mysql.createPool({ uri, connectionLimit: 2 });
    for (let i = 0; i < 3; i++) apps.push(await startLockApp({ mysql: { uri } }));
  }, 60_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await pool?.end();
    await server?.stop();
  });
  /** What the server keeps of `key`: semaphore holders, waiters, the key's row. */
  const rows = async (key: string): Promise<{ held: number; queued: number; lease: number }> => {
    const count = async (table: string): Promise<number> => {
      const [r] = await pool.query<mysql.RowDataPacket[]>(`SELECT COUNT(*) AS n FROM ${table} WHERE key_hash = UNHEX(SHA2(?, 256))`, [Buffer.from(key)]);
      return Number(r[0].n);
    };
    return { held: await count('nest_lock_sem_held'), queued: await count('nest_lock_sem_queue'), lease: await count('nest_lock_held') };
  };

  it('a plain lock and a semaphore on one key refuse each other both ways, naming permits; nothing is left after', async () => {
    const [a, b] = apps;
    const key = uniqueKey('my-sem-mark');
    const sem = await a.locks.acquire(key, { purpose: 'correctness', permits: 3, ttl: 5_000 });
    await expect(b.locks.acquire(key, { purpose: 'correctness', wait: 0 })).rejects.toMatchObject({ name: InvalidLockOptionsError.name, field: 'permits' });
    await expect(b.locks.acquire(key, { purpose: 'correctness', permits: 2, wait: 0 })).rejects.toMatchObject({ field: 'permits' });
    await sem.release();
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
    const plain = await a.locks.acquire(key, { purpose: 'correctness', ttl: 5_000 });
    await expect(b.locks.acquire(key, { purpose: 'correctness', permits: 3, wait: 0 })).rejects.toMatchObject({ field: 'permits' });
    await plain.release();
    // Each kind in turn once the other has gone: tokens keep growing across kinds.
    const next = await b.locks.acquire(key, { purpose: 'correctness', permits: 3, ttl: 5_000 });
    expect(next.token!).toBeGreaterThan(plain.token!);
    expect(plain.token!).toBeGreaterThan(sem.token!);
    await next.release();
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
  });

  it('30 callers from three apps race for 3 permits: never more than 3 valid at once, every token larger than the last, all served', async () => {
    const key = uniqueKey('my-sem-race');
    let inside = 0;
    let most = 0;
    const tokens: bigint[] = [];
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        apps[i % 3].locks.using(key, { purpose: 'correctness', permits: 3, ttl: 5_000, wait: 30_000 }, async (lease) => {
          inside += 1;
          most = Math.max(most, inside);
          tokens.push(lease.token!);
          await sleep(5 + (i % 4) * 5);
          inside -= 1;
        }),
      ),
    );
    expect(most).toBeLessThanOrEqual(3);
    expect(most).toBeGreaterThan(1);
    expect(new Set(tokens).size).toBe(30);
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
  }, 60_000);

  it('a permit that runs out (its holder gone) is taken by the next waiter at its next look', async () => {
    const [a, b] = apps;
    const key = uniqueKey('my-sem-expire');
    const [h1, h2] = [await a.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 600 }), await a.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 5_000 })];
    const started = performance.now();
    const third = await b.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 5_000, wait: 5_000 });
    const waited = performance.now() - started;
    expect(h1.signal.aborted).toBe(true);
    // After h1's 600 ms, within a heartbeat (500 ms) and room for a loaded machine.
    expect(waited).toBeGreaterThan(400);
    expect(waited).toBeLessThan(3_000);
    expect(third.token!).toBeGreaterThan(h2.token!);
    await Promise.all([h2.release(), third.release()]);
  }, 20_000);
});
