import { InvalidLockOptionsError, type DistributedLockModuleOptions, type Lease, type LockPurpose } from '../../lib/index.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from './lock-app.js';

/** One backend's semaphore case: how to reach its server, and what it promises. */
export interface SemaphoreCase {
  backend: string;
  purpose: LockPurpose;
  /** The backend issues fencing tokens (each holder its own, larger than any before on the key). */
  fencing: boolean;
  /** Start (or reach) the server: the module options, and how to stop what was started. */
  server: () => Promise<{ options: DistributedLockModuleOptions; stop(): Promise<void> }>;
}

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(10);
  }
}

/**
 * The semaphore contract every backend with `permits` meets, against its real server: three
 * application instances (three engines, three clients) share the server and nothing else.
 */
export function describeSemaphore(c: SemaphoreCase): void {
  describe(`semaphores (permits) on ${c.backend}`, () => {
    let running: Awaited<ReturnType<SemaphoreCase['server']>>;
    const apps: LockApp[] = [];
    const target = { backend: c.backend };
    const start = async (): Promise<LockApp> => {
      const app = await startLockApp(running.options);
      apps.push(app);
      return app;
    };
    let a: LockApp;
    let b: LockApp;
    let c3: LockApp;
    const opts = (permits: number, more: object = {}) => ({ purpose: c.purpose, backend: c.backend, permits, ...more });
    beforeAll(async () => {
      running = await c.server();
      [a, b, c3] = await Promise.all([start(), start(), start()]);
    }, 60_000);
    afterAll(async () => {
      for (const app of apps) await app.close();
      await running?.stop();
    });

    it('admits at most `permits` holders, each with its own lease and signal (and a larger token than any before)', async () => {
      const key = uniqueKey(`sem-${c.backend}`);
      const first = await a.locks.acquire(key, opts(3, { ttl: 20_000 }));
      const second = await b.locks.acquire(key, opts(3, { ttl: 20_000 }));
      const third = await c3.locks.acquire(key, opts(3, { ttl: 20_000 }));
      expect(await a.locks.tryAcquire(key, opts(3))).toBeNull();
      expect(await c3.locks.tryAcquire(key, opts(3))).toBeNull();
      const info = await a.locks.inspect(key, target);
      expect(info).toMatchObject({ key, backend: c.backend, permits: 3, holders: 3, waiters: 0 });
      if (c.fencing) {
        expect(first.token! < second.token! && second.token! < third.token!).toBe(true);
      }
      expect(first.signal).not.toBe(second.signal);
      await second.release();
      expect(first.signal.aborted || third.signal.aborted).toBe(false);
      const fourth = await c3.locks.tryAcquire(key, opts(3, { ttl: 20_000 }));
      expect(fourth).not.toBeNull();
      if (c.fencing) expect(fourth!.token! > third.token!).toBe(true);
      expect((await b.locks.inspect(key, target))?.holders).toBe(3);
      for (const lease of [first, third, fourth!]) await lease.release();
      expect(await b.locks.inspect(key, target)).toBeNull();
    });

    it('serves waiters in arrival order, each as soon as a permit is given back (no polling: long before any ttl)', async () => {
      const key = uniqueKey(`sem-fifo-${c.backend}`);
      const holders = [await a.locks.acquire(key, opts(2, { ttl: 30_000 })), await b.locks.acquire(key, opts(2, { ttl: 30_000 }))];
      const order: string[] = [];
      const waiters: Array<Promise<Lease>> = [];
      for (const [name, app] of [['w1', c3], ['w2', a], ['w3', b]] as const) {
        waiters.push(
          app.locks.acquire(key, opts(2, { ttl: 30_000, wait: 20_000 })).then((lease) => {
            order.push(name);
            return lease;
          }),
        );
        const queued = waiters.length;
        await eventually(async () => (await a.locks.inspect(key, target))?.waiters === queued, 5_000, `waiter ${name} queued`);
      }
      const released = Date.now();
      await holders[0].release();
      await eventually(() => order.length === 1, 3_000, 'w1 admitted');
      await holders[1].release();
      await eventually(() => order.length === 2, 3_000, 'w2 admitted');
      expect(Date.now() - released).toBeLessThan(6_000);
      const [w1, w2, w3] = [await waiters[0], await waiters[1], waiters[2]];
      await w1.release();
      const third = await w3;
      expect(order).toEqual(['w1', 'w2', 'w3']);
      await w2.release();
      await third.release();
    }, 30_000);

    it("refuses a caller whose permits differ from the key's holders' (a plain lock counts as 1), either way round", async () => {
      const key = uniqueKey(`sem-mismatch-${c.backend}`);
      const held = await a.locks.acquire(key, opts(2, { ttl: 20_000 }));
      await expect(b.locks.acquire(key, opts(3, { wait: 0 }))).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'permits' });
      await expect(b.locks.acquire(key, { purpose: c.purpose, backend: c.backend, wait: 1_000 })).rejects.toMatchObject({ field: 'permits' });
      await expect(b.locks.tryAcquire(key, { purpose: c.purpose, backend: c.backend })).rejects.toBeInstanceOf(InvalidLockOptionsError);
      // The refused callers left nothing behind: one more holder still gets in, then nobody.
      const second = await b.locks.acquire(key, opts(2, { ttl: 20_000, wait: 0 }));
      expect((await c3.locks.inspect(key, target))).toMatchObject({ holders: 2, waiters: 0 });
      await held.release();
      await second.release();

      const plainKey = uniqueKey(`sem-plain-${c.backend}`);
      const plain = await a.locks.acquire(plainKey, { purpose: c.purpose, backend: c.backend, ttl: 20_000 });
      await expect(b.locks.acquire(plainKey, opts(2, { wait: 1_000 }))).rejects.toMatchObject({ field: 'permits' });
      expect(plain.signal.aborted).toBe(false);
      await plain.release();
      const now = await b.locks.acquire(plainKey, opts(2, { wait: 0 }));
      await now.release();
    }, 30_000);

    it("frees a permit whose holder never gives it back at that holder's ttl, and aborts only that holder's signal", async () => {
      const key = uniqueKey(`sem-ttl-${c.backend}`);
      const stuck = await a.locks.acquire(key, opts(2, { ttl: 1_500 }));
      const kept = await b.locks.acquire(key, opts(2, { ttl: 20_000 }));
      const started = Date.now();
      const next = await c3.locks.acquire(key, opts(2, { ttl: 20_000, wait: 10_000 }));
      expect(Date.now() - started).toBeGreaterThan(1_000);
      expect(stuck.signal.aborted).toBe(true);
      expect(kept.signal.aborted).toBe(false);
      expect(await kept.extend(20_000)).toBeUndefined();
      await kept.release();
      await next.release();
    }, 30_000);

    it('gives the permits of a closing application to the waiters at once', async () => {
      const closing = await start();
      const key = uniqueKey(`sem-close-${c.backend}`);
      await closing.locks.acquire(key, opts(2, { ttl: 30_000 }));
      await closing.locks.acquire(key, opts(2, { ttl: 30_000 }));
      const waiting = a.locks.acquire(key, opts(2, { ttl: 30_000, wait: 20_000 }));
      await eventually(async () => (await b.locks.inspect(key, target))?.waiters === 1, 5_000, 'waiter queued');
      const started = Date.now();
      await closing.close();
      const lease = await waiting;
      expect(Date.now() - started).toBeLessThan(5_000);
      await lease.release();
    }, 30_000);

    it('force-releases every holder of a semaphore key: each is told, the waiters get in', async () => {
      const key = uniqueKey(`sem-force-${c.backend}`);
      const one = await a.locks.acquire(key, opts(2, { ttl: 30_000 }));
      const two = await b.locks.acquire(key, opts(2, { ttl: 30_000 }));
      const waiting = c3.locks.acquire(key, opts(2, { ttl: 30_000, wait: 20_000 }));
      await eventually(async () => (await c3.locks.inspect(key, target))?.waiters === 1, 5_000, 'waiter queued');
      expect(await c3.locks.forceRelease(key, target)).toBe(true);
      const next = await waiting;
      await eventually(() => one.signal.aborted && two.signal.aborted, 10_000, 'both holders told');
      if (c.fencing) expect(next.token! > two.token!).toBe(true);
      await next.release();
    }, 30_000);
  });
}
