import { startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';

// Adversarial review: the largest multi-key lease (1,000 keys), contended on its last key, then
// given up at the end of its wait: it must leave none of the 999 keys it took held.

/** How many keys, per backend: Redis takes them in batches of 64 per script, so 1,000; a backend not named here, 200. */
const COUNTS: Record<string, number> = { redis: 1_000 };

// Every backend that queues.
const CASES = EVERY_BACKEND.map((c) => ({ ...c, count: COUNTS[c.name] ?? 200 }));

describe.each(CASES)('$count keys on $name', ({ backend, count, purpose, server }) => {
  let running: BackendServer;
  let a: LockApp;
  let b: LockApp;
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  beforeAll(async () => {
    running = await server();
    const o = running.options;
    [a, b] = await Promise.all([startLockApp(o), startLockApp(o)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b]) await app?.close();
    await running?.stop();
  });

  it('takes them all, releases them all; a wait that runs out on the last key leaves none held', async () => {
    const base = uniqueKey(`rv-mk-many-${backend}`);
    const keys = Array.from({ length: count }, (_, i) => `${base}:${String(i).padStart(4, '0')}`);
    const t0 = Date.now();
    const lease = await a.locks.acquire(keys, opts({ ttl: 30_000, wait: 30_000 }));
    const took = Date.now() - t0;
    expect(lease.keys).toHaveLength(count);
    expect(await b.locks.tryAcquire(keys[count / 2], opts())).toBeNull();
    await lease.release();
    const probe = await b.locks.tryAcquire(keys[count - 1], opts());
    expect(probe).not.toBeNull();
    // Now b holds the last key; a waits for it and gives up.
    await expect(a.locks.acquire(keys, opts({ ttl: 30_000, wait: Math.max(2_000, took * 2) }))).rejects.toMatchObject({ name: 'LockBusyError' });
    await probe!.release();
    const held: string[] = [];
    for (const key of keys.slice(0, count - 1)) if (await b.locks.inspect(key, { backend })) held.push(key);
    expect({ took: took < 20_000, held }).toEqual({ took: true, held: [] });
  }, 120_000);
});
