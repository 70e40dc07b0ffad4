import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';

// Adversarial review: an application that shuts down while its callers wait for a semaphore's
// permit leaves nothing queued behind it — the next waiter of another application is admitted as
// soon as a permit is given back, not after the closed application's queue entries lapse.

// Every backend that queues and serves semaphores.
const ALL = EVERY_BACKEND.filter((c) => c.semaphores);
const only = process.env.RV_SEM_BACKENDS?.split(',');
const CASES = only ? ALL.filter((c) => only.includes(c.name) || only.includes(c.backend)) : ALL;

describe.each(CASES)('semaphore waiters of a closing application on $name', (c) => {
  let running: BackendServer;
  const apps: LockApp[] = [];
  beforeAll(async () => {
    running = await c.server();
  }, 90_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await running?.stop();
  });

  it('leaves no queue entry: inspect counts none right after close(), and the next waiter gets a freed permit at once', async () => {
    const start = async (): Promise<LockApp> => {
      const app = await startLockApp(running.options);
      apps.push(app);
      return app;
    };
    const [a, b, closing] = await Promise.all([start(), start(), start()]);
    const key = uniqueKey(`rv-sem-close-${c.backend}`);
    const target = { backend: c.backend };
    const opts = (more: object) => ({ purpose: c.purpose, backend: c.backend, permits: 2, ...more });
    const holders = [await a.locks.acquire(key, opts({ ttl: 30_000 })), await a.locks.acquire(key, opts({ ttl: 30_000 }))];
    const outcomes = [0, 1].map(() => closing.locks.acquire(key, opts({ ttl: 30_000, wait: 25_000 })).then(
      (lease) => `granted ${String(lease.token)}`,
      (error: unknown) => `refused: ${(error as Error).constructor.name}`,
    ));
    for (let j = 0; j < 200 && (await a.locks.inspect(key, target))?.waiters !== 2; j++) await sleep(20);
    expect(await a.locks.inspect(key, target)).toMatchObject({ holders: 2, waiters: 2 });
    await closing.close();
    expect(await Promise.all(outcomes)).toEqual(['refused: LockBackendUnavailableError', 'refused: LockBackendUnavailableError']);
    const after = await a.locks.inspect(key, target);
    const next = b.locks.acquire(key, opts({ ttl: 30_000, wait: 20_000 }));
    for (let j = 0; j < 200 && (await a.locks.inspect(key, target))?.waiters !== 1; j++) await sleep(20);
    const released = performance.now();
    await holders[0].release();
    const lease = await next;
    const waited = performance.now() - released;
    expect({ waitersAfterClose: after?.waiters, admittedWithin1s: waited < 1_000 }).toEqual({ waitersAfterClose: 0, admittedWithin1s: true });
    await lease.release();
    await holders[1].release();
    expect(await a.locks.inspect(key, target)).toBeNull();
  }, 60_000);
});
