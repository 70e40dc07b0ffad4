import { Redis } from 'ioredis';
import { LeaseLostError, LockBackendUnavailableError, type Lease } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, untilQueued, type LockApp } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

// The engine's promises on real servers when calls compose: shutdown while callers wait,
// reentrant handles that outlive their outer lease, lockAtLeastFor across a shutdown.
describe.each(['efficiency', 'correctness'] as const)('engine under composition (%s)', (purpose) => {
  const options = purpose === 'efficiency' ? { redis: { url: redisUrl() } } : { etcd: { hosts: etcdHosts() } };
  let other: LockApp;
  beforeAll(async () => {
    other = await startLockApp(options);
  });
  afterAll(async () => {
    await other.close();
  });

  it('closing the app while a local caller waits: the waiter rejects, its work never starts, and the key is free', async () => {
    const app = await startLockApp(options);
    const key = uniqueKey('close-wait');
    const holder = await app.locks.acquire(key, { purpose, ttl: 10_000 });
    let started = false;
    const waiter = app.locks
      .using(key, { purpose, wait: 10_000, ttl: 10_000 }, async () => {
        started = true;
        await sleep(50);
      })
      .then(
        () => 'ran',
        (e: unknown) => e,
      );
    await untilQueued(other.locks, key, { purpose }, 1); // the waiter is queued behind the holder
    await app.close();
    expect(await waiter).toBeInstanceOf(LockBackendUnavailableError);
    expect(started).toBe(false);
    expect(holder.signal.aborted).toBe(true);
    const next = await other.locks.acquire(key, { purpose, wait: 5_000 });
    await next.release();
  });

  it('a reentrant handle from a detached task keeps the key after the outer call returns, until it is released', async () => {
    const app = await startLockApp(options);
    try {
      const key = uniqueKey('detached');
      let handle!: Promise<Lease>;
      await app.locks.using(key, { purpose, ttl: 10_000 }, async () => {
        handle = app.locks.acquire(key, { purpose, wait: 0 });
        expect((await handle).reentrant).toBe(true);
      });
      const inner = await handle;
      expect(await other.locks.tryAcquire(key, { purpose })).toBeNull();
      expect(inner.signal.aborted).toBe(false);
      await inner.release();
      const taken = await other.locks.acquire(key, { purpose, wait: 5_000 });
      await taken.release();
    } finally {
      await app.close();
    }
  });
});

describe('lockAtLeastFor survives a shutdown (Redis)', () => {
  it('a replica closed mid-job keeps the key until lockAtLeastFor, then it is free', async () => {
    const app = await startLockApp({ redis: { url: redisUrl() } });
    const other = await startLockApp({ redis: { url: redisUrl() } });
    const raw = new Redis(redisUrl());
    try {
      const key = uniqueKey('tick');
      let finish!: () => void;
      let began!: () => void;
      const running = new Promise<void>((resolve) => (began = resolve));
      const job = app.locks.using(key, { purpose: 'efficiency', ttl: 10_000, lockAtLeastFor: 2_000 }, async () => {
        began();
        await new Promise<void>((resolve) => (finish = resolve));
      });
      await running;
      const closing = app.close();
      await sleep(100);
      finish();
      await closing;
      await job.catch(() => undefined);
      expect(await other.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      const pttl = await raw.pttl(`lock:{${key}}`);
      expect(pttl).toBeGreaterThan(0);
      expect(pttl).toBeLessThanOrEqual(2_000);
      await sleep(pttl + 50);
      const next = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
      expect(next).not.toBeNull();
      await next!.release();
    } finally {
      raw.disconnect();
      await other.close();
      await app.close();
    }
  });
});

describe('a caller\'s signal while the backend call is in flight (issue 13 item 4)', () => {
  it.each(['efficiency', 'correctness'] as const)('%s: aborted at 50 ms during a 1 s stall, acquire rejects with the reason and leaves nothing held', async (purpose) => {
    const target = purpose === 'efficiency' ? Number(new URL(redisUrl()).port) : Number(etcdHosts()[0].split(':').pop());
    const proxy = await TcpProxy.start(target);
    const options =
      purpose === 'efficiency'
        ? { redis: { url: `redis://${proxy.endpoint}`, commandTimeoutMs: 5_000 } }
        : { etcd: { hosts: proxy.endpoint, commandTimeoutMs: 5_000 } };
    const slow = await startLockApp(options);
    const direct = await startLockApp(purpose === 'efficiency' ? { redis: { url: redisUrl() } } : { etcd: { hosts: etcdHosts() } });
    try {
      const warm = await slow.locks.acquire(uniqueKey('warm'), { purpose }); // connections and session up
      await warm.release();
      const key = uniqueKey('inflight-abort');
      proxy.delay(1_000);
      const controller = new AbortController();
      const started = performance.now();
      setTimeout(() => controller.abort(new Error('caller gave up')), 50);
      const outcome = await slow.locks.acquire(key, { purpose, ttl: 10_000, signal: controller.signal }).catch((e: unknown) => e);
      const tookMs = performance.now() - started;
      expect(outcome).toBeInstanceOf(Error);
      expect((outcome as Error).message).toBe('caller gave up');
      expect(tookMs).toBeLessThan(500);
      // The grant that lands late is given back: the key is free for others soon after.
      const next = await direct.locks.acquire(key, { purpose, wait: 5_000 });
      await next.release();
    } finally {
      proxy.heal();
      await slow.close();
      await direct.close();
      await proxy.close();
    }
  }, 20_000);
});
