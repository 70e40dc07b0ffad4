import { Redis } from 'ioredis';
import { InvalidLockOptionsError, LeaseLostError, RedisFence, StaleFencingTokenError } from '../../lib/index.js';
import { etcdHosts, redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

describe('RedisFence: the resource refuses stale fencing tokens', () => {
  let redis: Redis;
  let fence: RedisFence;
  let a: LockApp;
  let b: LockApp;

  beforeAll(async () => {
    redis = new Redis(redisUrl());
    a = await startLockApp({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } });
    b = await startLockApp({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } });
    fence = new RedisFence(redis, { leases: a.locks });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    redis.disconnect();
  });

  it('after a write with token 34, a write with 33 throws and the stored value is unchanged', async () => {
    const key = uniqueKey('ledger');
    await fence.write(key, 'written by 34', 34n);
    const error = await fence.write(key, 'written by 33', 33n).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleFencingTokenError);
    expect((error as StaleFencingTokenError).token).toBe(33n);
    expect((error as StaleFencingTokenError).fence).toBe(34n);
    expect(await fence.read(key)).toBe('written by 34');
    expect(await fence.fence(key)).toBe(34n);
  });

  it('accepts the same token again (the same holder) and a higher token raises the fence', async () => {
    const key = uniqueKey('same-holder');
    await fence.write(key, 'one', 7n);
    await fence.write(key, 'two', 7n);
    await fence.write(key, 'three', 8n);
    expect(await fence.read(key)).toBe('three');
    await expect(fence.write(key, 'late', 7n)).rejects.toBeInstanceOf(StaleFencingTokenError);
  });

  it('compares tokens above 2^53 exactly (as doubles they would be equal)', async () => {
    const key = uniqueKey('big');
    const big = 2n ** 53n + 1n;
    await fence.write(key, 'newer', big);
    await expect(fence.write(key, 'older', 2n ** 53n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    await fence.write(key, 'much newer', 2n ** 64n + 5n);
    await expect(fence.write(key, 'older', 2n ** 64n + 4n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    await expect(fence.write(key, 'shorter', 99_999n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.read(key)).toBe('much newer');
  });

  it('a fenced read raises the fence, so a read-modify-write cannot lose a newer holder\'s update', async () => {
    const key = uniqueKey('rmw');
    await fence.write(key, '[]', 1n);
    const readByA = JSON.parse((await fence.read(key, 5n))!) as string[]; // A (token 5) reads, then stalls
    const readByB = JSON.parse((await fence.read(key, 6n))!) as string[]; // B (token 6) reads the same value
    await expect(fence.write(key, JSON.stringify([...readByA, 'A']), 5n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    await fence.write(key, JSON.stringify([...readByB, 'B']), 6n);
    expect(JSON.parse((await fence.read(key))!)).toEqual(['B']);
    await expect(fence.read(key, 5n)).rejects.toBeInstanceOf(StaleFencingTokenError);
  });

  it('takes the token from the current correctness lease when none is passed', async () => {
    const key = uniqueKey('current');
    const token = await a.locks.using(key, { purpose: 'correctness' }, async (lease) => {
      await fence.write(key, 'from lease');
      expect(await fence.read(key)).toBe('from lease');
      return lease.token!;
    });
    expect(await fence.fence(key)).toBe(token);
  });

  it('refuses to write with no token and no lease, or under a lease without a token', async () => {
    const key = uniqueKey('no-token');
    await expect(fence.write(key, 'x')).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await a.locks.using(key, { purpose: 'efficiency' }, async () => {
      await expect(fence.write(key, 'x')).rejects.toThrow(/no fencing token.*correctness/);
    });
    expect(await fence.read(key)).toBeNull();
  });

  it('rejects the late write of a holder whose etcd lease expired and was taken over', async () => {
    const key = uniqueKey('takeover');
    const first = await a.locks.acquire(key, { purpose: 'correctness', ttl: 300 });
    await new Promise((resolve) => first.signal.addEventListener('abort', resolve));
    const second = await b.locks.acquire(key, { purpose: 'correctness', wait: 2_000 });
    await fence.write(key, 'by the second holder', second.token!);
    // The first holder's write arrives late, carrying its old token.
    await expect(fence.write(key, 'by the first holder', first.token!)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.read(key)).toBe('by the second holder');
    await second.release();
  });

  it('refuses at once a write from a context whose lease is known to be lost', async () => {
    const key = uniqueKey('lost');
    await a.locks
      .using(key, { purpose: 'correctness', ttl: 200 }, async (lease) => {
        await new Promise((resolve) => lease.signal.addEventListener('abort', resolve));
        await expect(fence.write(key, 'too late')).rejects.toBeInstanceOf(LeaseLostError);
      });
    expect(await fence.read(key)).toBeNull();
  });
});
