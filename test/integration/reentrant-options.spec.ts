import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { DistributedLock, DistributedLockModule, DistributedLockService, LeaseLostError, type LockPurpose } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Review finding 7 of issue 13's second pass: a nested acquisition of a key its async context
// already holds (acquire, using, a decorated call) got a handle on the outer lease and silently
// ignored its own ttl, watchdog, maxHold, lockAtLeastFor and lockDelay. Decision: the nested call
// gets what it asks for — the outer lease is raised to it (never lowered) — or it fails before its
// work starts. Real Redis (and etcd for the ttl), two application instances.

const options = { redis: { url: process.env.TEST_REDIS_URL! }, etcd: { hosts: (process.env.TEST_ETCD_HOSTS ?? '').split(',') } };

describe('a reentrant acquisition gets the lease settings it asks for (the outer lease is raised, never lowered)', () => {
  let a: LockApp;
  let b: LockApp;
  let raw: Redis;
  beforeAll(async () => {
    redisUrl();
    etcdHosts();
    [a, b] = await Promise.all([startLockApp(options), startLockApp(options)]);
    raw = new Redis(redisUrl());
  });
  afterAll(async () => {
    raw.disconnect();
    await Promise.all([a.close(), b.close()]);
  });

  it.each<[string, LockPurpose]>([
    ['Redis', 'efficiency'],
    ['etcd', 'correctness'],
  ])('%s: a nested call asking for a longer ttl gets it — the key outlives the outer ttl while the nested work runs', async (_backend, purpose) => {
    const key = uniqueKey(`longer-ttl-${purpose}`);
    await a.locks.using(key, { purpose, ttl: 1_500 }, async (outer) => {
      await a.locks.using(key, { purpose, ttl: 8_000 }, async (inner) => {
        expect(inner.reentrant).toBe(true);
        expect(inner.remainingMs()).toBeGreaterThan(5_000);
        if (purpose === 'efficiency') expect(await raw.pttl(`lock:{${key}}`)).toBeGreaterThan(5_000);
        await sleep(2_000); // past the outer's 1.5 s
        expect(inner.signal.aborted).toBe(false);
        expect(outer.signal.aborted).toBe(false);
        expect(await b.locks.tryAcquire(key, { purpose })).toBeNull();
      });
    });
    const next = await b.locks.tryAcquire(key, { purpose });
    expect(next).not.toBeNull();
    await next!.release();
  }, 20_000);

  it('a nested call asking for no more than the outer gives changes nothing (no round trip, the same validity)', async () => {
    const key = uniqueKey('shorter');
    await a.locks.using(key, { purpose: 'efficiency', ttl: 5_000 }, async (outer) => {
      const before = outer.remainingMs();
      const inner = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 2_000 });
      expect(inner.reentrant).toBe(true);
      expect(outer.remainingMs()).toBeLessThanOrEqual(before);
      expect(await raw.pttl(`lock:{${key}}`)).toBeLessThanOrEqual(5_000);
      await inner.release();
    });
  });

  it('a nested call asking for the watchdog when the outer has none gets renewals, up to its maxHold', async () => {
    const key = uniqueKey('watchdog');
    let lost = false;
    await a.locks.using(key, { purpose: 'efficiency', ttl: 2_000 }, async (outer) => {
      outer.signal.addEventListener('abort', () => (lost = true));
      await a.locks.using(key, { purpose: 'efficiency', ttl: 2_000, watchdog: true, maxHold: 20_000 }, async () => {
        await sleep(5_000); // 2.5 ttls: only renewals keep it
        expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      });
    });
    expect(lost).toBe(false);
  }, 20_000);

  it('a nested watchdog with a longer maxHold than the outer\'s keeps renewing past the outer\'s cap', async () => {
    const key = uniqueKey('max-hold');
    let lost = false;
    await a.locks.using(key, { purpose: 'efficiency', ttl: 2_000, watchdog: true, maxHold: 3_000 }, async (outer) => {
      outer.signal.addEventListener('abort', () => (lost = true));
      await a.locks.using(key, { purpose: 'efficiency', ttl: 2_000, watchdog: true, maxHold: 20_000 }, async () => {
        await sleep(5_000); // the outer's cap alone would end the lease at 3 s
        expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      });
    });
    expect(lost).toBe(false);
  }, 20_000);

  it('a nested lockAtLeastFor keeps the key for that long after the nested call began, though the outer had none', async () => {
    const key = uniqueKey('at-least');
    await a.locks.using(key, { purpose: 'efficiency', ttl: 10_000 }, async () => {
      await a.locks.using(key, { purpose: 'efficiency', ttl: 10_000, lockAtLeastFor: 1_500 }, () => undefined);
    });
    expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
    const pttl = await raw.pttl(`lock:{${key}}`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(1_500);
    await sleep(pttl + 50);
    const next = await b.locks.tryAcquire(key, { purpose: 'efficiency' });
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('a nested lockDelay longer than the outer\'s is written to the key at once', async () => {
    const key = uniqueKey('lock-delay');
    await a.locks.using(key, { purpose: 'efficiency', ttl: 1_000 }, async () => {
      const inner = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 1_000, lockDelay: 5_000 });
      // A crash now leaves the key for the ttl + the nested lock-delay.
      expect(await raw.pttl(`lock:{${key}}`)).toBeGreaterThan(4_000);
      await inner.release();
    });
  });

  it('a decorated method called inside a shorter using() of its key runs under its own, longer ttl', async () => {
    const key = uniqueKey('decorated');
    @Injectable()
    class Report {
      constructor(readonly locks: DistributedLockService) {}
      @DistributedLock({ purpose: 'efficiency', key: (k: string) => k, ttl: 8_000 })
      async build(_key: string): Promise<boolean> {
        await sleep(2_000);
        return this.locks.current()!.signal.aborted;
      }
    }
    @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() } })], providers: [Report] })
    class AppModule {}
    const app: INestApplicationContext = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const locks = app.get(DistributedLockService);
      const aborted = await locks.using(key, { purpose: 'efficiency', ttl: 1_000 }, async () => {
        const outcome = await app.get(Report).build(key);
        expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
        return outcome;
      });
      expect(aborted).toBe(false);
    } finally {
      await app.close();
    }
  }, 20_000);

  it('fails closed: when raising the outer lease finds it lost, the nested call rejects and its work never starts', async () => {
    const key = uniqueKey('raise-lost');
    let ran = false;
    const outcome = await a.locks
      .using(key, { purpose: 'efficiency', ttl: 5_000 }, async () => {
        await raw.del(`lock:{${key}}`); // our own key vanished (a failover without persistence)
        await a.locks.using(key, { purpose: 'efficiency', ttl: 8_000 }, () => {
          ran = true;
        });
      })
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LeaseLostError);
    expect(ran).toBe(false);
  });
});
