import { Redis } from 'ioredis';
import { LockBackendUnavailableError, type Lease } from '../../lib/index.js';
import { redisUrl, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';

describe('DistributedLockService semantics on Redis', () => {
  let app: LockApp;
  let other: LockApp;
  let raw: Redis;

  beforeAll(async () => {
    app = await startLockApp({ redis: { url: redisUrl() } });
    other = await startLockApp({ redis: { url: redisUrl() } });
    raw = new Redis(redisUrl());
  });
  afterAll(async () => {
    await app.close();
    await other.close();
    raw.disconnect();
  });

  it('using() passes the lease, current() sees it below, and the key is gone afterwards', async () => {
    const key = uniqueKey('using');
    expect(app.locks.current()).toBeUndefined();
    const result = await app.locks.using(key, { purpose: 'efficiency' }, async (lease) => {
      await Promise.resolve();
      const nested = async (): Promise<Lease | undefined> => app.locks.current();
      expect(await nested()).toBe(lease);
      expect(app.locks.current(key)).toBe(lease);
      expect(app.locks.current('another-key')).toBeUndefined();
      expect(lease.remainingMs()).toBeGreaterThan(0);
      expect(lease.token).toBeUndefined(); // Redis issues no fencing tokens
      return 'done';
    });
    expect(result).toBe('done');
    expect(app.locks.current()).toBeUndefined();
    expect(await raw.exists(`lock:{${key}}`)).toBe(0);
  });

  it('releases when fn throws, and rethrows fn\'s own error untouched', async () => {
    const key = uniqueKey('throws');
    class PaymentDeclined extends Error {}
    const thrown = new PaymentDeclined('declined');
    await expect(app.locks.using(key, { purpose: 'efficiency' }, () => Promise.reject(thrown))).rejects.toBe(thrown);
    expect(await raw.exists(`lock:{${key}}`)).toBe(0);
  });

  it('is reentrant within one async context: the inner handle shares the lease and does not release it', async () => {
    const key = uniqueKey('reentrant');
    await app.locks.using(key, { purpose: 'efficiency' }, async (outer) => {
      const inner = await app.locks.acquire(key, { purpose: 'efficiency', wait: 0 });
      expect(inner.reentrant).toBe(true);
      // The handle has its own signal: it aborts with the outer lease (lost or released), not before.
      expect(inner.signal.aborted).toBe(false);
      expect(outer.signal.aborted).toBe(false);
      await inner.release();
      expect(await raw.exists(`lock:{${key}}`)).toBe(1);
      expect(await other.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
    });
    expect(await raw.exists(`lock:{${key}}`)).toBe(0);
  });

  it('does not treat concurrent callers outside the context as reentrant', async () => {
    const key = uniqueKey('not-reentrant');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holding = app.locks.using(key, { purpose: 'efficiency' }, () => gate);
    // The first caller holds the key (its body waits on the gate) before the concurrent one asks.
    await until(async () => (await app.locks.inspect(key, { purpose: 'efficiency' })) !== null, 10_000, 'the first caller holding the key');
    expect(await app.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
    release();
    await holding;
  });

  it('await using releases at the end of the scope', async () => {
    const key = uniqueKey('await-using');
    {
      await using lease = await app.locks.acquire(key, { purpose: 'efficiency' });
      expect(lease.key).toBe(key);
      expect(await raw.exists(`lock:{${key}}`)).toBe(1);
    }
    expect(await raw.exists(`lock:{${key}}`)).toBe(0);
  });
});

describe('a failing release never hides the caller\'s result or error', () => {
  let server: RedisServer;
  let app: LockApp;

  beforeAll(async () => {
    server = await RedisServer.start();
    app = await startLockApp({ redis: { url: server.url, commandTimeoutMs: 300, connectTimeoutMs: 300 } });
  });
  afterAll(async () => {
    server.resume();
    await app.close();
    await server.stop();
  });

  it('returns fn\'s result and reports the failed release as an event', async () => {
    const failures: unknown[] = [];
    app.locks.events.on('release-failed', (e) => failures.push(e.error));
    const result = await app.locks.using(uniqueKey('release-fails'), { purpose: 'efficiency', ttl: 5_000 }, () => {
      server.pause(); // Redis stops answering before the release
      return 42;
    });
    server.resume();
    expect(result).toBe(42);
    expect(failures).toHaveLength(1);
    expect(failures[0]).toBeInstanceOf(LockBackendUnavailableError);
  });

  it('rethrows fn\'s error, not the release error', async () => {
    const own = new Error('the method\'s own failure');
    const error = await app.locks
      .using(uniqueKey('both-fail'), { purpose: 'efficiency', ttl: 5_000 }, () => {
        server.pause();
        throw own;
      })
      .catch((e: unknown) => e);
    server.resume();
    expect(error).toBe(own);
  });

  it('await using swallows the release error instead of raising a SuppressedError', async () => {
    const own = new Error('scope failure');
    const run = async (): Promise<void> => {
      await using _lease = await app.locks.acquire(uniqueKey('dispose-fails'), { purpose: 'efficiency', ttl: 5_000 });
      server.pause();
      throw own;
    };
    const error = await run().catch((e: unknown) => e);
    server.resume();
    expect(error).toBe(own);
  });
});
