import { Redis } from 'ioredis';
import { redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { LockWorker } from '../harness/worker.js';

describe('Redis backend with separate processes that die (kill -9)', () => {
  let app: LockApp;
  let raw: Redis;
  const workers: LockWorker[] = [];

  beforeAll(async () => {
    app = await startLockApp({ redis: { url: redisUrl() } });
    raw = new Redis(redisUrl());
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.kill9()));
    await app.close();
    raw.disconnect();
  });

  it('a process holding the key excludes this one; after its kill -9 the key frees at its ttl', async () => {
    const key = uniqueKey('dead-holder');
    const worker = await LockWorker.start(redisUrl());
    workers.push(worker);
    worker.send({ op: 'acquire', key, ttl: 1_000, wait: 0 });
    await worker.next('acquired');
    expect(await app.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
    await worker.kill9();
    const started = performance.now();
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', wait: 5_000 });
    // Woken by the holder's expiry (≤ 1 s ttl), not by a release that never comes.
    expect(performance.now() - started).toBeLessThan(2_000);
    await lease.release();
  });

  it('a waiter killed while queued does not block the queue behind it for long', async () => {
    const key = uniqueKey('dead-waiter');
    const holder = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 30_000 });
    const worker = await LockWorker.start(redisUrl());
    workers.push(worker);
    worker.send({ op: 'acquire', key, ttl: 30_000, wait: 60_000 });
    await worker.next('waiting');
    for (let i = 0; i < 100 && (await raw.llen(`lock:{${key}}:q2`)) === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await raw.llen(`lock:{${key}}:q2`)).toBe(1);
    const live = app.locks.acquire(key, { purpose: 'efficiency', ttl: 30_000, wait: 20_000 });
    // The live waiter queues behind the doomed one.
    for (let i = 0; i < 500 && (await raw.llen(`lock:{${key}}:q2`)) < 2; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await raw.llen(`lock:{${key}}:q2`)).toBe(2);
    await worker.kill9();
    const started = performance.now();
    await holder.release(); // hands the key to the dead process first
    const lease = await live;
    const waited = performance.now() - started;
    // Bounded by the dead entry's lifetime and its reservation (3 × 500 ms each).
    expect(waited).toBeLessThan(6_000);
    expect(await raw.llen(`lock:{${key}}:q2`)).toBe(0);
    await lease.release();
  });
});
