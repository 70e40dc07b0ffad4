import type { DistributedLockModuleOptions, LockPurpose } from '../../lib/index.js';
import { etcdHosts, redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review: the largest multi-key lease (1,000 keys), contended on its last key, then
// given up at the end of its wait: it must leave none of the 999 keys it took held.

interface Case {
  backend: string;
  /** Keys in the lease: the most on Redis; on etcd past the one-txn limit (64), at a cost the suite can pay. */
  count: number;
  purpose: LockPurpose;
  options: () => DistributedLockModuleOptions;
}

const CASES: Case[] = [
  { backend: 'redis', count: 1_000, purpose: 'efficiency', options: () => ({ redis: { url: redisUrl() } }) },
  { backend: 'etcd', count: 200, purpose: 'correctness', options: () => ({ etcd: { hosts: etcdHosts() } }) },
];

describe.each(CASES)('$count keys on $backend', ({ backend, count, purpose, options }) => {
  let a: LockApp;
  let b: LockApp;
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  beforeAll(async () => {
    const o = options();
    [a, b] = await Promise.all([startLockApp(o), startLockApp(o)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b]) await app?.close();
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
