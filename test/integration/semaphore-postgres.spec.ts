import { InvalidLockOptionsError, PostgresBackend, type Lease } from '../../lib/index.js';
import { withPermits } from '../../lib/backends/semaphore.util.js';
import type { LockBackend } from '../../lib/backends/lock-backend.interface.js';
import { describeSemaphore } from '../harness/semaphore-contract.js';
import { closablePool } from '../harness/pg-pool.js';
import { PostgresServer } from '../harness/postgres.mjs';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { backendsOf } from '../harness/backends-of.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

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
  const view = (app: LockApp, permits: number): LockBackend => withPermits(backendsOf(app.app).get('postgres')!, permits);
  /** What the server keeps of `key`: semaphore holders, waiters, and the lease row (the mark). */
  const rows = async (key: string): Promise<{ held: number; queued: number; lease: number }> => {
    const count = async (table: string): Promise<number> =>
      (await db.pool.query(`SELECT count(*)::int AS n FROM public.${table} WHERE key = $1`, [key])).rows[0].n as number;
    return { held: await count('nest_lock_sem_held'), queued: await count('nest_lock_sem_queue'), lease: await count('nest_lock_held') };
  };

  /** Wait (bounded) until `key` has `n` waiters on the server. */
  const queuedReaches = async (key: string, n: number): Promise<void> => {
    const deadline = Date.now() + 10_000;
    while ((await rows(key)).queued !== n) {
      if (Date.now() > deadline) throw new Error(`${key}: ${n} waiters not within 10 s`);
      await sleep(20);
    }
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

  it('an answer that came after the caller gave up leaves no permit held (its clean-up waited behind it on the key)', async () => {
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
    // The late acquire lands once the blocker commits (later still on a loaded machine), and its
    // clean-up behind it: wait until both have run, then nothing may be left.
    const deadline = Date.now() + 5_000;
    const clean = async (): Promise<boolean> =>
      JSON.stringify(await rows(key)) === JSON.stringify({ held: 0, queued: 0, lease: 0 }) && (await app.locks.inspect(key, { backend: 'postgres' })) === null;
    // The late acquire has run (no session waits for the advisory lock, none is still in
    // sem_acquire): before that the rows are empty too, and the look below would prove nothing.
    const lateAcquireDone = async (): Promise<boolean> =>
      (
        await db.pool.query(
          `SELECT ((SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted) + (SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%sem_acquire_v1%' AND state <> 'idle' AND pid <> pg_backend_pid()))::int AS n`,
        )
      ).rows[0].n === 0;
    while (!(await lateAcquireDone()) && Date.now() < deadline) await sleep(20);
    while (!(await clean()) && Date.now() < deadline) await sleep(50);
    expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
    expect(await app.locks.inspect(key, { backend: 'postgres' })).toBeNull();
  }, 30_000);

  it('an answer that came after the caller gave up leaves no permit held, even when the clean-up ran first (it runs again behind the answer)', async () => {
    const proxy = await TcpProxy.start(server.port, server.host);
    const app = await start({ connectionString: `postgres://${server.user}@${proxy.endpoint}/${server.database}`, commandTimeoutMs: 300 });
    try {
      const key = uniqueKey('sem-late-reordered');
      const sem = view(app, 2);
      // Warm the pool: the clean-up below takes another, idle connection.
      await Promise.all([sem.inspect!(key), sem.inspect!(key), sem.inspect!(key)]);
      const issued = async (): Promise<string> => (await db.pool.query('SELECT last_value::text || is_called::text AS v FROM public.nest_lock_tokens')).rows[0].v as string;
      const before = await issued();
      proxy.delay(1_500);
      const late = sem.acquire({ key, owner: 'late-owner-2', ttlMs: 30_000, queue: false });
      await sleep(50);
      proxy.heal(); // only the acquire's request is held back: the clean-up release overtakes it
      await expect(late).rejects.toThrow(/no answer within 300 ms/);
      const deadline = Date.now() + 5_000;
      while ((await issued()) === before && Date.now() < deadline) await sleep(20); // the acquire lands: a token is drawn
      // The token is drawn inside the acquire's transaction: wait for that transaction to end.
      while ((await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%sem_acquire_v1%' AND state <> 'idle' AND pid <> pg_backend_pid()`)).rows[0].n > 0) await sleep(20);
      const empty = JSON.stringify({ held: 0, queued: 0, lease: 0 });
      while (JSON.stringify(await rows(key)) !== empty && Date.now() < deadline) await sleep(20);
      expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
    } finally {
      await app.close();
      await proxy.close();
    }
  }, 30_000);

  it('wakes a waiter by NOTIFY: admitted long before its heartbeat re-check or any ttl', async () => {
    const pools = [closablePool(server), closablePool(server)];
    // Passed in, so the heartbeat can be longer than the whole wait: only a NOTIFY can admit the waiter in time.
    const backends = pools.map((p) => new PostgresBackend({ pool: p.pool, ownsPool: false, waiterHeartbeatMs: 10_000, name: 'pg' }));
    const [holderApp, waiterApp] = await Promise.all(backends.map((pg) => startLockApp({ backends: { pg } })));
    try {
      const key = uniqueKey('sem-notify');
      const opts = { purpose: 'correctness' as const, backend: 'pg', permits: 2, ttl: 30_000 };
      const held = [await holderApp.locks.acquire(key, opts), await holderApp.locks.acquire(key, opts)];
      const waiting = waiterApp.locks.acquire(key, { ...opts, wait: 20_000 });
      await queuedReaches(key, 1);
      const started = Date.now();
      await held[0].release();
      const lease = await waiting;
      expect(Date.now() - started).toBeLessThan(2_000);
      await lease.release();
      await held[1].release();
    } finally {
      await holderApp.close();
      await waiterApp.close();
      // The applications leave a backend they were given open (its LISTEN session with it).
      for (const pg of backends) await pg.close();
      for (const p of pools) await p.end();
    }
  }, 30_000);

  it('a plain caller and a semaphore caller racing for a free key: never both hold it', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    for (let round = 0; round < 10; round++) {
      const key = uniqueKey('sem-vs-plain');
      const outcomes = await Promise.allSettled([
        a.locks.tryAcquire(key, { purpose: 'correctness', ttl: 20_000 }),
        b.locks.tryAcquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 }),
        a.locks.tryAcquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 }),
      ]);
      const leases = outcomes.flatMap((o) => (o.status === 'fulfilled' && o.value ? [o.value] : []));
      const refused = outcomes.filter((o) => o.status === 'rejected');
      for (const o of refused) expect((o as PromiseRejectedResult).reason).toBeInstanceOf(InvalidLockOptionsError);
      const plainWon = outcomes[0].status === 'fulfilled' && outcomes[0].value !== null;
      // The plain lease alone, or semaphore holders only, never a mix. (A single try may also find
      // the key's locks busy for the instant another caller's statement holds them: null, no permit.)
      if (plainWon) expect(leases).toHaveLength(1);
      else expect(leases.length).toBeLessThanOrEqual(2);
      for (const lease of leases) await lease.release();
      expect(await rows(key)).toEqual({ held: 0, queued: 0, lease: 0 });
    }
  }, 30_000);

  it('a waiter that stops waiting leaves the queue, and the ones behind it move up', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const key = uniqueKey('sem-leave');
    const holders = [await a.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 }), await a.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000 })];
    const quitting = new AbortController();
    const first = b.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000, wait: 20_000, signal: quitting.signal }).catch((error: unknown) => error);
    await queuedReaches(key, 1);
    const second = b.locks.acquire(key, { purpose: 'correctness', permits: 2, ttl: 20_000, wait: 20_000 });
    await queuedReaches(key, 2);
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
