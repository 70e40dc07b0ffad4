import { Redis } from 'ioredis';
import { InvalidLockOptionsError } from '../../lib/index.js';
import { redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Issue 35: the Redis key layout carries a number (layout 2: the queue is `lock:{key}:q2`, a list).
// An instance of 0.1.x (layout 1) queues its waiters in `lock:{key}:q` and `lock:{key}:qa` (sorted
// sets, scored by arrival and by the entry's expiry), and hands the key on only to them. A waiter of
// this version that meets them is refused, naming both layouts, instead of waiting in a line the old
// instances never serve. What layout 1 leaves on the server is written here as 0.1.x wrote it.
describe('Redis key layout: instances of another layout on the same keys', () => {
  let app: LockApp;
  let raw: Redis;
  const opts = { purpose: 'efficiency' as const, ttl: 10_000 };

  /** A waiter of a layout-1 instance, queued as 0.1.x queued it (arrival in µs, entry expiry in ms). */
  async function layout1Waiter(key: string, owner = 'old-instance-waiter'): Promise<void> {
    const [seconds, micros] = await raw.time();
    const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    await raw.zadd(`lock:{${key}}:q`, Number(seconds) * 1_000_000 + Number(micros), owner);
    await raw.zadd(`lock:{${key}}:qa`, nowMs + 1_500, owner);
    await raw.pexpire(`lock:{${key}}:q`, 1_500);
    await raw.pexpire(`lock:{${key}}:qa`, 1_500);
  }

  beforeAll(async () => {
    app = await startLockApp({ redis: { url: redisUrl() } });
    raw = new Redis(redisUrl());
  });
  afterAll(async () => {
    await app.close();
    raw.disconnect();
  });

  it('a first waiter that finds layout 1 waiters queued is refused, naming both layouts, and leaves nothing queued', async () => {
    const key = uniqueKey('layout-first');
    const holder = await app.locks.acquire(key, opts);
    await layout1Waiter(key);
    const error = await app.locks.acquire(key, { ...opts, wait: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('keyPrefix');
    expect((error as Error).message).toMatch(/layout 1 .*layout 2/);
    expect(await raw.exists(`lock:{${key}}:q2`)).toBe(0);
    await holder.release();
    expect(await raw.exists(`lock:{${key}}`)).toBe(0);
  });

  it('a waiter already in line is refused at its next look once a layout 1 waiter queues behind it', async () => {
    const key = uniqueKey('layout-later');
    const holder = await app.locks.acquire(key, opts);
    const started = performance.now();
    const waiting = app.locks.acquire(key, { ...opts, wait: 10_000 }).catch((e: unknown) => e);
    for (let i = 0; i < 200 && (await raw.llen(`lock:{${key}}:q2`)) === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(await raw.llen(`lock:{${key}}:q2`)).toBe(1);
    await layout1Waiter(key);
    const error = await waiting;
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('keyPrefix');
    // At its next look: the heartbeat is 500 ms (2 s is room for a loaded machine, not a promise).
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(await raw.exists(`lock:{${key}}:q2`)).toBe(0);
    await holder.release();
  });

  it('the lock key is shared across layouts: a layout 1 holder excludes this version, and a free key is taken whatever layout 1 queued', async () => {
    const held = uniqueKey('layout-held');
    await raw.set(`lock:{${held}}`, 'old-instance-holder', 'PX', 10_000);
    expect(await app.locks.tryAcquire(held, opts)).toBeNull();
    await raw.del(`lock:{${held}}`);

    const free = uniqueKey('layout-free');
    await layout1Waiter(free);
    const lease = await app.locks.acquire(free, opts);
    expect(await raw.get(`lock:{${free}}`)).not.toBeNull();
    await lease.release();
  });
});
