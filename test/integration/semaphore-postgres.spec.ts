import type { Lease } from '../../lib/index.js';
import type { LockBackend } from '../../lib/backends/lock-backend.interface.js';
import { describeSemaphore } from '../harness/semaphore-contract.js';
import { closablePool } from '../harness/pg-pool.js';
import { PostgresServer } from '../harness/postgres.mjs';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { backendsOf } from '../harness/backends-of.js';

// The semaphore contract on PostgreSQL (a server this spec starts), then what only this backend
// can get wrong: acquirers racing for the last permit under the key's advisory lock, a holder
// whose process died, an answer that came after the caller gave up.
describeSemaphore({
  backend: 'postgres',
  purpose: 'correctness',
  fencing: true,
  server: async () => {
    const pg = await PostgresServer.start();
    return { options: { postgres: { connectionString: pg.url } }, stop: () => pg.stop() };
  },
});

describe('PostgreSQL semaphores: races, dead holders, late answers', () => {
  let server: PostgresServer;
  let db: ReturnType<typeof closablePool>;
  const apps: LockApp[] = [];
  const start = async (options: Record<string, unknown> = {}): Promise<LockApp> => {
    const app = await startLockApp({ postgres: { connectionString: server.url, ...options } });
    apps.push(app);
    return app;
  };
  const view = (app: LockApp, permits: number): LockBackend => backendsOf(app.app).get('postgres')!.semaphore!(permits);
  /** What the server keeps of `key`: semaphore holders, waiters, and the lease row (the mark). */
  const rows = async (key: string): Promise<{ held: number; queued: number; lease: number }> => {
    const count = async (table: string): Promise<number> =>
      (await db.pool.query(`SELECT count(*)::int AS n FROM public.${table} WHERE key = $1`, [key])).rows[0].n as number;
    return { held: await count('nest_lock_sem_held'), queued: await count('nest_lock_sem_queue'), lease: await count('nest_lock_held') };
  };

  beforeAll(async () => {
    server = await PostgresServer.start();
    db = closablePool(server);
  }, 60_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await db?.end();
    await server?.stop();
  });

  it('admits exactly `permits` of 20 acquirers racing from 3 applications, with distinct increasing tokens; odd keys are fine', async () => {
    const [a, b, c] = await Promise.all([start(), start(), start()]);
    for (let round = 0; round < 3; round++) {
      const key = uniqueKey(`{sem}:ключ:🔑:${round}`);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => [a, b, c][i % 3].locks.tryAcquire(key, { purpose: 'correctness', permits: 3, ttl: 20_000 })),
      );
      const leases = results.filter((lease): lease is Lease => lease !== null);
      expect(leases).toHaveLength(3);
      expect(new Set(leases.map((lease) => lease.token)).size).toBe(3);
      expect(await a.locks.inspect(key, { backend: 'postgres' })).toMatchObject({ permits: 3, holders: 3, waiters: 0 });
      // The refused left nothing behind.
      expect(await rows(key)).toEqual({ held: 3, queued: 0, lease: 1 });
      for (const lease of leases) await lease.release();
      expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
    }
  }, 60_000);

  it('frees the permit of a holder whose process died at its ttl, and a waiter gets it then', async () => {
    const [dead, live] = await Promise.all([start(), start()]);
    const key = uniqueKey('sem-dead');
    // A holder nobody renews or releases: a process that died right after its grant.
    const grant = await view(dead, 2).acquire({ key, owner: 'dead-owner', ttlMs: 1_200, queue: false });
    expect(grant.acquired).toBe(true);
    const kept = await live.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 });
    const started = Date.now();
    const next = await live.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000, wait: 10_000 });
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThan(700);
    expect(waited).toBeLessThan(5_000);
    expect(next.token! > kept.token!).toBe(true);
    await kept.release();
    await next.release();
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
  }, 30_000);

  it('an answer that came after the caller gave up leaves no permit held (the clean-up runs again behind it)', async () => {
    const app = await start({ commandTimeoutMs: 300 });
    const key = uniqueKey('sem-late');
    // Another session holds the key's advisory lock: the acquire waits for it past its command timeout.
    const blocker = await db.pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(`SELECT pg_advisory_xact_lock(hashtextextended('public.nest_lock:' || $1, 0))`, [key]);
      await expect(view(app, 2).acquire({ key, owner: 'late-owner', ttlMs: 30_000, queue: false })).rejects.toThrow(/no answer within 300 ms/);
      await sleep(200);
      await blocker.query('COMMIT');
    } finally {
      blocker.release();
    }
    const deadline = Date.now() + 5_000;
    while ((await rows(key)).lease > 0 && Date.now() < deadline) await sleep(50);
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
    expect(await app.locks.inspect(key, { backend: 'postgres' })).toBeNull();
  }, 30_000);

  it('a waiter that stops waiting leaves the queue, and the ones behind it move up', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const key = uniqueKey('sem-leave');
    const holders = [await a.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 }), await a.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 })];
    const quitting = new AbortController();
    const first = b.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000, wait: 20_000, signal: quitting.signal }).catch((error: unknown) => error);
    await sleep(300);
    const second = b.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000, wait: 20_000 });
    await sleep(300);
    expect((await rows(key)).queued).toBe(2);
    quitting.abort(new Error('stop'));
    await first;
    expect((await rows(key)).queued).toBe(1);
    const started = Date.now();
    await holders[0].release();
    const lease = await second;
    expect(Date.now() - started).toBeLessThan(2_000);
    await lease.release();
    await holders[1].release();
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
  }, 30_000);
});
