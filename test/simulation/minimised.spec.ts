import { LockBackendUnavailableError } from '../../lib/index.js';
import { startLockApp, redisUrl, uniqueKey, sleep, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { backendsOf } from '../harness/backends-of.js';

/** Per-owner collections of a backend (every Map and Set but the per-key busy cache), by name: size. */
function ownerState(app: LockApp, backend: string): Record<string, number> {
  const b = backendsOf(app.app).get(backend) as unknown as Record<string, unknown>;
  const out: Record<string, number> = {};
  for (const [name, value] of Object.entries(b)) {
    if ((value instanceof Map || value instanceof Set) && !/busy/i.test(name)) out[name] = value.size;
    const inner = (value as { waiters?: unknown } | undefined)?.waiters;
    if (inner instanceof Map) out[`${name}.waiters`] = inner.size;
  }
  return out;
}

/**
 * Violations the simulation found, each minimised by hand to the few steps that cause it, so a
 * fix can be checked in seconds. Each test names the seed that found it
 * (`npm run test:simulation -- --seed N` replays that seed's plan) and asserts the invariant.
 */
describe('simulation findings, minimised', () => {
  describe('seed 1 (invariant 1): an extend() to a shorter ttl that timed out still lands, and the holder keeps its old validity', () => {
    let proxy: TcpProxy;
    let holder: LockApp;
    let other: LockApp;

    beforeAll(async () => {
      const port = Number(new URL(redisUrl()).port);
      proxy = await TcpProxy.start(port);
      holder = await startLockApp({ redis: { url: `redis://${proxy.endpoint}`, connectTimeoutMs: 500, commandTimeoutMs: 500 } });
      other = await startLockApp({ redis: { url: redisUrl() } });
    });
    afterAll(async () => {
      proxy.heal();
      await holder?.close();
      await other?.close();
      await proxy?.close();
    });

    it('seed 343: nor while a shorter extend() is in flight (it may land at any moment)', async () => {
      const key = uniqueKey('inflight-extend');
      // Patient: the extend is answered (late) rather than timed out.
      const patient = await startLockApp({ redis: { url: `redis://${proxy.endpoint}`, commandTimeoutMs: 3_000 } });
      const lease = await patient.locks.acquire(key, { purpose: 'efficiency', ttl: 3_000 });
      // A slow network: the extend reaches Redis 300 ms from now, its answer comes 300 ms later.
      proxy.delay(300);
      const extending = lease.extend(200).catch((e: Error) => e);
      let theirs;
      const deadline = performance.now() + 1_500;
      while (!theirs && performance.now() < deadline) {
        theirs = await other.locks.tryAcquire(key, { purpose: 'efficiency', ttl: 1_000 });
        if (!theirs) await sleep(10);
      }
      const holderThinks = lease.remainingMs() > 0 && !lease.signal.aborted;
      proxy.heal();
      await extending;
      await theirs?.release();
      await lease.release().catch(() => undefined);
      await patient.close();
      expect({ otherGotIt: theirs !== null && theirs !== undefined, holderStillTrustsIt: holderThinks }).not.toEqual({ otherGotIt: true, holderStillTrustsIt: true });
    });

    it('never lets another owner in while the holder is told it has time left', async () => {
      const key = uniqueKey('late-extend');
      const lease = await holder.locks.acquire(key, { purpose: 'efficiency', ttl: 3_000 });
      // The network swallows the extend (a TCP stall): no answer within commandTimeoutMs…
      proxy.blackhole();
      const extended = await lease.extend(200).then(
        () => 'ok',
        (e: Error) => e.name,
      );
      expect(extended).toBe('LockBackendUnavailableError');
      // …then delivers it: Redis now expires the key 200 ms from here.
      proxy.heal();
      let theirs;
      const deadline = performance.now() + 1_000;
      while (!theirs && performance.now() < deadline) {
        theirs = await other.locks.tryAcquire(key, { purpose: 'efficiency', ttl: 1_000 });
        if (!theirs) await sleep(10);
      }
      const holderThinks = lease.remainingMs() > 0 && !lease.signal.aborted;
      await theirs?.release();
      await lease.release().catch(() => undefined);
      // Either the key stays the holder's while it trusts it, or the holder stops trusting it first.
      expect({ otherGotIt: theirs !== null && theirs !== undefined, holderStillTrustsIt: holderThinks }).not.toEqual({ otherGotIt: true, holderStillTrustsIt: true });
    });
  });

  describe('seed 1 / old-library seed 7 (invariant 5): a queued acquire that cannot reach Redis leaves its owner in the backend for good', () => {
    let server: RedisServer;
    let holder: LockApp;
    let waiter: LockApp;

    beforeAll(async () => {
      server = await RedisServer.start();
      const redis = { url: server.url, connectTimeoutMs: 300, commandTimeoutMs: 300 };
      holder = await startLockApp({ redis });
      waiter = await startLockApp({ redis });
    });
    afterAll(async () => {
      await holder?.close();
      await waiter?.close();
      await server?.stop();
    });

    it('forgets every owner whose acquire failed', async () => {
      const key = uniqueKey('owner-leak');
      const lease = await holder.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      // The key is busy: the waiter queues (it subscribes and remembers the key as busy).
      await expect(waiter.locks.acquire(key, { purpose: 'efficiency', ttl: 1_000, wait: 100 })).rejects.toThrow(/held by another owner|busy/i);
      expect(Object.values(ownerState(waiter, 'redis')).every((n) => n === 0)).toBe(true);
      // Redis dies; the next acquire, within a second of the busy answer, goes straight to the
      // queue and fails waiting for a connection.
      await server.kill9();
      await sleep(100); // the client notices: it is reconnecting now
      const failed = await waiter.locks.acquire(key, { purpose: 'efficiency', ttl: 1_000, wait: 200 }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(LockBackendUnavailableError);
      await server.restart();
      await sleep(1_000);
      await lease.release().catch(() => undefined);
      // Nothing is held or waited for any more: no owner may be left behind.
      expect(ownerState(waiter, 'redis')).toEqual(Object.fromEntries(Object.keys(ownerState(waiter, 'redis')).map((k) => [k, 0])));
    });
  });
});
