import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { DistributedLockTestingModule, TestingLockBackend } from '../../lib/testing/index.js';
import { NestFactory } from '@nestjs/core';
import { DistributedLock, DistributedLockModule, DistributedLockService, InvalidLockOptionsError, MemoryBackend, RedisFence, type Lease } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { backendsOf } from '../harness/backends-of.js';
import { backendCases, type BackendCase } from '../harness/backend-servers.js';
import { LEASE_INTERNALS } from '../../lib/engine/lease.js';

// Multi-key leases against real servers: callers in separate applications share the server only.

// Every backend and topology.
const CASES = backendCases();

describe.each(CASES)('multi-key leases on $name', ({ backend, purpose, fencing, server }) => {
  let running: Awaited<ReturnType<BackendCase['server']>>;
  let a: LockApp;
  let b: LockApp;
  let c: LockApp;
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  const free = async (app: LockApp, key: string): Promise<boolean> => {
    const lease = await app.locks.tryAcquire(key, opts());
    await lease?.release();
    return lease !== null;
  };
  beforeAll(async () => {
    running = await server();
    [a, b, c] = await Promise.all([startLockApp(running.options), startLockApp(running.options), startLockApp(running.options)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b, c]) await app?.close();
    await running?.stop();
  });

  it('takes every key or none: a busy key leaves the others free; the lease lists its keys sorted and releases them all', async () => {
    const [k1, k2, k3] = ['1', '2', '3'].map((n) => uniqueKey(`mk-${backend}-${n}`));
    const held = await a.locks.acquire(k2, opts({ ttl: 20_000 }));
    expect(await b.locks.tryAcquire([k3, k2, k1], opts())).toBeNull();
    expect(await free(c, k1)).toBe(true);
    expect(await free(c, k3)).toBe(true);
    await held.release();
    const lease = await b.locks.acquire([k3, k2, k1, k2], opts({ ttl: 20_000 }));
    expect(lease.keys).toEqual([k1, k2, k3]);
    expect(lease.key).toBe(k1);
    if (fencing) expect(lease.token! > held.token!).toBe(true);
    for (const key of [k1, k2, k3]) expect(await free(c, key)).toBe(false);
    await lease.extend(30_000);
    // etcd and ZooKeeper: bounded by the session (10 s, 4 s here), as for a lease on one key.
    expect(lease.remainingMs()).toBeGreaterThan(2_000);
    await lease.release();
    for (const key of [k1, k2, k3]) expect(await free(c, key)).toBe(true);
  }, 30_000);

  it('takes free keys in one step where the backend can (Redis: one script, etcd: one txn), one at a time elsewhere', async () => {
    const backendOf = backendsOf(a.app).get(backend)!;
    const calls = { acquire: 0, acquireAll: 0 };
    const original = { acquire: backendOf.acquire, acquireAll: backendOf.acquireAll };
    backendOf.acquire = (request) => (calls.acquire++, original.acquire.call(backendOf, request));
    if (original.acquireAll) backendOf.acquireAll = (keys, owners, ttl) => (calls.acquireAll++, original.acquireAll!.call(backendOf, keys, owners, ttl));
    try {
      const keys = ['1', '2', '3', '4'].map((n) => uniqueKey(`mk-one-step-${backend}-${n}`));
      const lease = await a.locks.acquire(keys, opts({ ttl: 10_000 }));
      expect(calls).toEqual(original.acquireAll ? { acquire: 0, acquireAll: 1 } : { acquire: 4, acquireAll: 0 });
      for (const key of keys) expect(await free(c, key)).toBe(false);
      if (fencing) {
        for (const key of keys) {
          const info = await a.locks.inspect(key, { backend });
          // One step: one token for all; key by key: the lease's is the largest of theirs.
          if (original.acquireAll) expect(info?.token).toBe(lease.token);
          else expect(info!.token! <= lease.token!).toBe(true);
        }
      }
      await lease.release();
      for (const key of keys) expect(await free(c, key)).toBe(true);
    } finally {
      backendOf.acquire = original.acquire;
      if (original.acquireAll) backendOf.acquireAll = original.acquireAll;
    }
  });

  it('callers naming the same keys in opposite orders never deadlock, and never overlap on a key', async () => {
    const [x, y] = ['x', 'y'].map((n) => uniqueKey(`mk-order-${backend}-${n}`));
    const inside = new Map<string, number>();
    let overlaps = 0;
    const worker = async (app: LockApp, keys: string[]): Promise<number> => {
      let done = 0;
      for (let i = 0; i < 8; i++) {
        await app.locks.using(keys, opts({ ttl: 10_000, wait: 20_000 }), async () => {
          for (const key of keys) {
            if (inside.get(key)) overlaps++;
            inside.set(key, 1);
          }
          await sleep(5);
          for (const key of keys) inside.set(key, 0);
          done++;
        });
      }
      return done;
    };
    const counts = await Promise.all([worker(a, [x, y]), worker(b, [y, x]), worker(c, [x, y])]);
    expect(counts).toEqual([8, 8, 8]);
    expect(overlaps).toBe(0);
  }, 60_000);

  it('keeps the keys it holds alive while it waits longer than its ttl for the rest', async () => {
    const [k1, k2] = ['1', '2'].map((n) => uniqueKey(`mk-wait-${backend}-${n}`));
    const blocker = await a.locks.acquire(k2, opts({ ttl: 20_000 }));
    const waiting = b.locks.acquire([k1, k2], opts({ ttl: 1_000, wait: 15_000 }));
    setTimeout(() => void blocker.release(), 2_500);
    const lease = await waiting;
    // Granted with its validity intact, and k1 was never free meanwhile for a third caller to take.
    expect(lease.remainingMs()).toBeGreaterThan(500);
    expect(await free(c, k1)).toBe(false);
    expect(await free(c, k2)).toBe(false);
    await lease.release();
  }, 30_000);

  it('one of its keys force-released: the whole lease is lost', async () => {
    const [k1, k2] = ['1', '2'].map((n) => uniqueKey(`mk-force-${backend}-${n}`));
    const lease = await a.locks.acquire([k1, k2], opts({ ttl: 3_000 }));
    expect(await c.locks.forceRelease(k2, { backend })).toBe(true);
    const deadline = Date.now() + 5_000;
    while (!lease.signal.aborted && Date.now() < deadline) await sleep(10);
    expect(lease.signal.aborted).toBe(true);
    await lease.release().catch(() => undefined);
    expect(await free(c, k1)).toBe(true);
  }, 30_000);
});

describe('multi-key leases: a failure on the way gives back what was taken', () => {
  it('a key that turns out to be a semaphore refuses the lease and leaves the earlier keys free at once', async () => {
    const app = await startLockApp({ memory: {} });
    try {
      const semaphore = await app.locks.acquire('b', { purpose: 'efficiency', permits: 2 });
      await expect(app.locks.acquire(['a', 'b'], { purpose: 'efficiency', wait: 1_000 })).rejects.toMatchObject({ field: 'permits' });
      expect(await app.locks.inspect('a', { purpose: 'efficiency' })).toBeNull();
      await semaphore.release();
    } finally {
      await app.close();
    }
  });
});

describe('multi-key leases composed with shutdown and late answers', () => {
  it('close() while a caller holds the first key and waits for the second: it rejects and leaves no key held', async () => {
    const shared = new MemoryBackend('shared');
    const a = await startLockApp({ backends: { shared } });
    const b = await startLockApp({ backends: { shared } });
    try {
      const blocker = await a.locks.acquire('y', { purpose: 'efficiency' });
      const waiting = b.locks.acquire(['x', 'y'], { purpose: 'efficiency', wait: 10_000 });
      // It has taken x and waits (queued) for y.
      await until(async () => ((await a.locks.inspect('y', { purpose: 'efficiency' }))?.waiters ?? 0) >= 1, 10_000, 'waiting for y');
      expect(await a.locks.inspect('x', { purpose: 'efficiency' })).not.toBeNull(); // held while it waits for y
      await b.close();
      await expect(waiting).rejects.toThrow(/shutting down/);
      expect(await a.locks.inspect('x', { purpose: 'efficiency' })).toBeNull();
      expect((await a.locks.inspect('y', { purpose: 'efficiency' }))?.waiters).toBe(0);
      await blocker.release();
    } finally {
      await b.close();
      await a.close();
    }
  });

  it('answers later than the ttl: the grant is not trusted, and no key stays held', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [DistributedLockTestingModule.forRoot()] }).compile();
    await moduleRef.init();
    try {
      const backend = moduleRef.get(TestingLockBackend);
      backend.delayAcquisition(150);
      await expect(moduleRef.get(DistributedLockService).acquire(['p', 'q'], { purpose: 'efficiency', ttl: 100, wait: 400 })).rejects.toThrow(/longer than the 100 ms ttl/);
      backend.restore();
      await sleep(50);
      expect(backend.isHeld('p') || backend.isHeld('q')).toBe(false);
    } finally {
      await moduleRef.close();
    }
  });
});

describe('multi-key leases: nesting, the decorator, bad input', () => {
  it('a nested acquisition of one of its keys re-enters it; of some of its keys plus another, is refused', async () => {
    const app = await startLockApp({ memory: {} });
    try {
      await app.locks.using(['a', 'b'], { purpose: 'efficiency' }, async (outer) => {
        const inner = await app.locks.acquire('b', { purpose: 'efficiency', wait: 0 });
        expect(inner.reentrant).toBe(true);
        expect(inner.keys).toEqual(['a', 'b']);
        await inner.release();
        const both = await app.locks.acquire(['b', 'a'], { purpose: 'efficiency', wait: 0 });
        expect(both.reentrant).toBe(true);
        await both.release();
        await expect(app.locks.acquire(['a', 'c'], { purpose: 'efficiency', wait: 0 })).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'key' });
        expect(LEASE_INTERNALS.held(outer)).toBe(true);
      });
    } finally {
      await app.close();
    }
  });

  it("a fence finds a multi-key lease's token for any of its keys, not only the first (simulation finding)", async () => {
    const app = await startLockApp({ etcd: { hosts: etcdHosts() } });
    const redis = new Redis(redisUrl());
    try {
      const fence = new RedisFence(redis, { leases: app.locks, keyPrefix: uniqueKey('mk-fence') });
      const [from, to] = [uniqueKey('acct-a'), uniqueKey('acct-b')];
      await app.locks.using([to, from], { purpose: 'correctness' }, async (lease) => {
        // No token given: the fence takes it from the lease this context holds on the resource's key.
        await fence.write(from, '1');
        await fence.write(to, '2');
        expect(await fence.read(to, lease.token)).toBe('2');
      });
    } finally {
      redis.disconnect();
      await app.close();
    }
  });

  it('a key function returning several keys locks them all for the call', async () => {
    @Injectable()
    class Transfers {
      constructor(readonly locks: DistributedLockService) {}
      @DistributedLock({ purpose: 'efficiency', key: (from: string, to: string) => [`account:${from}`, `account:${to}`] })
      async transfer(_from: string, _to: string): Promise<readonly string[]> {
        return this.locks.current()!.keys;
      }
    }
    @Module({ imports: [DistributedLockModule.forRoot({ memory: {} })], providers: [Transfers] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const transfers = app.get(Transfers);
      expect(await transfers.transfer('b', 'a')).toEqual(['account:a', 'account:b']);
      const locks = app.get(DistributedLockService);
      const held = await locks.acquire('account:b', { purpose: 'efficiency' });
      await expect(transfers.transfer('a', 'b')).rejects.toMatchObject({ name: 'LockBusyError' });
      expect(await locks.inspect('account:a', { purpose: 'efficiency' })).toBeNull();
      await held.release();
    } finally {
      await app.close();
    }
  });

  it.each([
    [[], /at least one key/],
    [['a', ''], /must not be empty/],
    [['a', 7], /must be a string/],
    [Array.from({ length: 1_001 }, (_, i) => `k${i}`), /at most 1000 distinct keys/],
  ])('refuses keys %#', async (keys, message) => {
    const app = await startLockApp({ memory: {} });
    try {
      await expect(app.locks.acquire(keys as string[], { purpose: 'efficiency' })).rejects.toThrow(message);
      await expect(app.locks.acquire(['a', 'b'], { purpose: 'efficiency', permits: 2 })).rejects.toMatchObject({ field: 'permits' });
    } finally {
      await app.close();
    }
  });
});
