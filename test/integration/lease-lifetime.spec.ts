import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { DistributedLock, DistributedLockModule, LeaseLostError, type Lease } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';

const aborted = (lease: Lease): Promise<{ at: number; reason: unknown }> =>
  new Promise((resolve) => lease.signal.addEventListener('abort', () => resolve({ at: performance.now(), reason: lease.signal.reason })));

describe.each(['redis', 'etcd'] as const)('lease lifetime on %s', (backend) => {
  let a: LockApp;
  let b: LockApp;
  const purpose = backend === 'redis' ? 'efficiency' : 'correctness';

  beforeAll(async () => {
    const options = backend === 'redis' ? { redis: { url: redisUrl() } } : { etcd: { hosts: etcdHosts() } };
    a = await startLockApp(options);
    b = await startLockApp(options);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('watchdog on: a method running 3× its ttl keeps the lock throughout; the key is free right after release', async () => {
    const key = uniqueKey('watchdog');
    const renewals: number[] = [];
    a.locks.events.on('renewed', (e) => e.key === key && renewals.push(e.remainingMs));
    let stolen = 0;
    await a.locks.using(key, { purpose, ttl: 600, watchdog: true, maxHold: 10_000 }, async (lease) => {
      const until = performance.now() + 1_800;
      while (performance.now() < until) {
        if (await b.locks.tryAcquire(key, { purpose })) stolen += 1;
        await sleep(100);
      }
      expect(lease.signal.aborted).toBe(false);
    });
    expect(stolen).toBe(0);
    expect(renewals.length).toBeGreaterThanOrEqual(4);
    const next = await b.locks.tryAcquire(key, { purpose });
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('watchdog stops at maxHold: the signal aborts and the key becomes free', async () => {
    const key = uniqueKey('max-hold');
    const lease = await a.locks.acquire(key, { purpose, ttl: 300, watchdog: true, maxHold: 900 });
    const started = performance.now();
    const { at, reason } = await aborted(lease);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe('expired');
    // Renewed past the 300 ms ttl, never past the 900 ms cap (timer slack allowed).
    expect(at - started).toBeGreaterThan(600);
    expect(at - started).toBeLessThan(2 * 900);
    const next = await b.locks.acquire(key, { purpose, wait: 2_000 });
    await next.release();
  });

  it('watchdog off: an overrunning holder\'s signal aborts within ttl + 1 s and another instance gets the lock', async () => {
    const key = uniqueKey('overrun');
    const started = performance.now();
    const running = a.locks.using(key, { purpose, ttl: 400 }, async (lease) => {
      const { at } = await aborted(lease);
      expect(at - started).toBeLessThan(400 + 1_000);
      await sleep(300); // keeps going a little after the loss, as real work does
    });
    const other = await b.locks.acquire(key, { purpose, wait: 3_000 });
    expect(performance.now() - started).toBeLessThan(400 + 1_000 + 500);
    await other.release();
    await running;
  });

  it('a signal first read after the lease expired reads aborted (expired); one read before it aborts for a late listener at the expiry', async () => {
    // The AbortController is made on first read of `signal`: nobody read these until now.
    const untouched = await a.locks.acquire(uniqueKey('lazy-signal-late'), { purpose, ttl: 300 });
    // The lease counts from its request's send time, not from the answer: measured from when the
    // answer came, a slow etcd answer (47 ms in a fresh-clone run) made it look 2 ms early.
    const granted = performance.now();
    const early = await a.locks.acquire(uniqueKey('lazy-signal-early'), { purpose, ttl: 600 });
    await sleep(200);
    const loss = aborted(early); // subscribed late, while still held
    expect(early.signal.aborted).toBe(false);
    const { at, reason } = await loss;
    expect(at - granted).toBeGreaterThanOrEqual(550);
    expect(at - granted).toBeLessThan(1_600);
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe('expired');
    // 700+ ms after a 300 ms grant: first read now.
    expect(untouched.signal.aborted).toBe(true);
    expect(untouched.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((untouched.signal.reason as LeaseLostError).reason).toBe('expired');
    expect(untouched.remainingMs()).toBe(0);
    await expect(untouched.extend()).rejects.toBeInstanceOf(LeaseLostError);
    // Its key was given up: another instance takes it.
    const next = await b.locks.tryAcquire(untouched.key, { purpose });
    expect(next).not.toBeNull();
    await next?.release();
    await untouched.release();
    await early.release();
  });

  it('rejectOnLoss: using() rejects with LeaseLostError at the loss instead of waiting for fn', async () => {
    const key = uniqueKey('hard-cancel');
    const started = performance.now();
    const error = await a.locks
      .using(key, { purpose, ttl: 300, rejectOnLoss: true }, () => sleep(2_000).then(() => 'finished'))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(performance.now() - started).toBeLessThan(1_500);
  });

  it('lockAtLeastFor: a 10 ms run keeps the lock for the at-least window, then frees it by itself', async () => {
    const key = uniqueKey('at-least');
    await a.locks.using(key, { purpose, ttl: 5_000, lockAtLeastFor: 800 }, () => sleep(10));
    const released = performance.now();
    expect(await b.locks.tryAcquire(key, { purpose })).toBeNull();
    await sleep(300);
    expect(await b.locks.tryAcquire(key, { purpose })).toBeNull();
    const next = await b.locks.acquire(key, { purpose, wait: 3_000 });
    expect(performance.now() - released).toBeGreaterThan(400);
    await next.release();
  });

  it('lock-delay: after an involuntary loss the key stays unavailable for the delay; a release frees it at once', async () => {
    const key = uniqueKey('lock-delay');
    const lost = await a.locks.acquire(key, { purpose, ttl: 300, lockDelay: 900 });
    const { at } = await aborted(lost);
    await sleep(200);
    expect(await b.locks.tryAcquire(key, { purpose })).toBeNull(); // inside the delay
    const next = await b.locks.acquire(key, { purpose, wait: 3_000 });
    expect(performance.now() - at).toBeGreaterThan(600);
    await next.release();
    // A clean release: no delay.
    const quick = await a.locks.acquire(key, { purpose, ttl: 5_000, lockDelay: 900 });
    await quick.release();
    const after = await b.locks.tryAcquire(key, { purpose });
    expect(after).not.toBeNull();
    await after!.release();
  });
});

describe('watchdog and Redis outages', () => {
  let server: RedisServer;
  let app: LockApp;
  beforeAll(async () => {
    server = await RedisServer.start();
    app = await startLockApp({ redis: { url: server.url, connectTimeoutMs: 300, commandTimeoutMs: 300 } });
  });
  afterAll(async () => {
    await app.close();
    await server.stop();
  });

  it('after release, no further renewal reaches Redis (INFO commandstats)', async () => {
    const raw = new Redis(server.url);
    try {
      const pexpireCalls = async (): Promise<number> => {
        const line = ((await raw.info('commandstats')) as string).split('\n').find((l) => l.startsWith('cmdstat_pexpire:'));
        return line ? Number(/calls=(\d+)/.exec(line)![1]) : 0;
      };
      const lease = await app.locks.acquire(uniqueKey('no-renew-after-release'), { purpose: 'efficiency', ttl: 300, watchdog: true, maxHold: 60_000 });
      // Renewals are running (a ttl of 300 ms: one every ~100 ms) before the release.
      await until(async () => (await pexpireCalls()) >= 3, 10_000, 'three renewals');
      const renewedBefore = await pexpireCalls();
      expect(renewedBefore).toBeGreaterThanOrEqual(3);
      await lease.release();
      const atRelease = await pexpireCalls();
      await sleep(1_000);
      expect(await pexpireCalls()).toBe(atRelease);
      expect(atRelease - renewedBefore).toBeLessThanOrEqual(1); // at most one renewal was in flight
    } finally {
      raw.disconnect();
    }
  });

  it('Redis stopped during a watchdog-held lock: the signal aborts no later than the validity end', async () => {
    const failures: unknown[] = [];
    app.locks.events.on('renewal-failed', (e) => failures.push(e.error));
    const key = uniqueKey('outage');
    let renewed = 0;
    const onRenewed = (e: { key: string }): void => void (e.key === key && (renewed += 1));
    app.locks.events.on('renewed', onRenewed);
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 900, watchdog: true, maxHold: 60_000 });
    // The watchdog has renewed it (the loss below is of a renewed lease).
    await until(() => renewed >= 1, 10_000, 'a renewal');
    app.locks.events.off('renewed', onRenewed);
    await server.kill9();
    const validityEnd = performance.now() + lease.remainingMs();
    const { at, reason } = await aborted(lease);
    expect((reason as LeaseLostError).reason).toBe('expired');
    expect(at).toBeLessThanOrEqual(validityEnd + 200); // timer and event-loop slack on a busy machine
    expect(failures.length).toBeGreaterThanOrEqual(1);
    await server.restart();
  });
});

describe('lockAtLeastFor on a decorated job in two application instances', () => {
  const runs: string[] = [];
  const key = uniqueKey('nightly');

  @Injectable()
  class NightlyJob {
    @DistributedLock({ purpose: 'efficiency', key, ttl: 30_000, lockAtLeastFor: 1_000, onBusy: 'skip' })
    async run(by: string): Promise<void> {
      runs.push(by);
      await sleep(10);
    }
  }

  it('a job that finishes in 10 ms in A is not run again by B within the at-least window', async () => {
    const apps = await Promise.all(
      ['A', 'B'].map(async () => {
        @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() } })], providers: [NightlyJob] })
        class AppModule {}
        return NestFactory.createApplicationContext(AppModule, { logger: false });
      }),
    );
    try {
      const [jobA, jobB] = apps.map((app) => app.get(NightlyJob));
      await jobA.run('A');
      await sleep(100); // B's clock is late: it fires the same tick 100 ms after A finished
      await jobB.run('B');
      await sleep(400);
      await jobB.run('B');
      expect(runs).toEqual(['A']);
      await sleep(700); // past the window
      await jobB.run('B');
      expect(runs).toEqual(['A', 'B']);
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  });
});
