import { Etcd3 } from 'etcd3';
import { EtcdBackend } from '../../lib/backends/etcd/etcd.backend.js';
import { InvalidLockOptionsError, LeaseLostError, LockBackendUnavailableError, type Lease } from '../../lib/index.js';
import { etcdHosts, sleep, startLockApp, uniqueKey, until, untilQueued, type LockApp } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { ResettingProxy } from './etcd-defects-proxy.js';

/** Regression tests for the etcd backend defects of issue 12 (items 3, 8 and 16), on a real etcd. */

const prefixOf = (key: string): string => `lock/${encodeURIComponent(key)}/`;

/** Resolves with the signal's reason once it aborts. */
const aborted = (signal: AbortSignal): Promise<unknown> =>
  signal.aborted ? Promise.resolve(signal.reason) : new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));

/** The etcd endpoint `npm test` started (the proxies below sit in front of it). */
function etcdPort(): number {
  return Number(etcdHosts()[0].split(':').pop());
}

describe('etcd defects (issue 12)', () => {
  let raw: Etcd3;
  const cleanups: Array<() => Promise<unknown> | unknown> = [];

  beforeAll(() => {
    raw = new Etcd3({ hosts: etcdHosts() });
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await Promise.resolve(cleanup()).catch(() => undefined);
  });
  afterAll(() => raw.close());

  async function app(etcd: Record<string, unknown>): Promise<LockApp> {
    const started = await startLockApp({ etcd: etcd as never });
    cleanups.push(() => started.close());
    return started;
  }

  async function proxy(): Promise<TcpProxy> {
    const started = await TcpProxy.start(etcdPort());
    // Runs after the apps that use it are closed (cleanups run in reverse order).
    cleanups.push(() => started.close());
    return started;
  }

  // Issue 12, item 3.
  it('a tryAcquire whose answer timed out does not leave its key behind: another instance gets the lock within ttl + a few s', async () => {
    const key = uniqueKey('try-timeout');
    const network = await proxy();
    const slow = await app({ hosts: network.endpoint, commandTimeoutMs: 500 });
    const other = await app({ hosts: etcdHosts() });
    // Warm up: session lease and connection exist before the fault.
    await (await slow.locks.acquire(uniqueKey('warm-up'), { purpose: 'correctness', wait: 0 })).release();

    // Prove the late write really lands (else the test would pass vacuously).
    const puts: string[] = [];
    const watcher = await raw.watch().prefix(prefixOf(key)).create();
    cleanups.push(() => watcher.cancel());
    watcher.on('put', (kv) => puts.push(kv.key.toString()));

    network.delay(1_500);
    const ttl = 3_000;
    const error = await slow.locks.tryAcquire(key, { purpose: 'correctness', ttl }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockBackendUnavailableError);
    const failedAt = performance.now();
    // The put was only delayed: it reaches etcd after the client gave up on it.
    for (let i = 0; i < 100 && puts.length === 0; i++) await sleep(50);
    network.heal();
    expect(puts).toEqual([expect.stringContaining(prefixOf(key))]);

    let lease: Lease | null = null;
    while (!lease && performance.now() - failedAt < ttl + 5_000) {
      lease = await other.locks.tryAcquire(key, { purpose: 'correctness', ttl: 10_000 });
      if (!lease) await sleep(200);
    }
    const freeAfterMs = performance.now() - failedAt;
    expect({ acquired: lease !== null, freeAfterMs: Math.round(freeAfterMs) }).toEqual({ acquired: true, freeAfterMs: expect.any(Number) });
    expect(freeAfterMs).toBeLessThan(ttl + 5_000);
    await lease!.release();
    // The slow instance's stray key is gone for good (not just between two clean-ups).
    expect(await raw.getAll().prefix(prefixOf(key)).keys()).toHaveLength(0);
  });

  // Found while fixing item 3: etcd3's default fault handling turned one timed-out answer into
  // 5 s of BrokenCircuitError for every call of the instance.
  it('one answer that came too late does not make every etcd call of the instance fail for seconds', async () => {
    const network = await proxy();
    const slow = await app({ hosts: network.endpoint, commandTimeoutMs: 500 });
    await (await slow.locks.acquire(uniqueKey('warm-up'), { purpose: 'correctness', wait: 0 })).release();

    network.delay(1_500);
    const error = await slow.locks.tryAcquire(uniqueKey('late'), { purpose: 'correctness', ttl: 3_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockBackendUnavailableError);
    network.heal();
    await sleep(3_000); // what the delay still held has been delivered: the network is healthy again

    const next = await slow.locks.acquire(uniqueKey('after'), { purpose: 'correctness', wait: 0 }).then(
      (lease) => lease,
      (e: unknown) => String(e),
    );
    expect(typeof next === 'string' ? next : 'a lease').toBe('a lease');
    await (next as Lease).release();
  });

  // Found while fixing item 3: etcd3 re-sends a request whose connection dropped before the answer.
  it('a tryAcquire whose answer was lost to a connection reset gets the free key, and strands no key', async () => {
    const key = uniqueKey('reset');
    const network = await ResettingProxy.start(etcdPort());
    cleanups.push(() => network.close());
    // A long session: no keep-alive answer is the one the fault catches.
    const flaky = await app({ hosts: network.endpoint, sessionTtlSeconds: 30 });
    const other = await app({ hosts: etcdHosts() });
    await (await flaky.locks.acquire(uniqueKey('warm-up'), { purpose: 'correctness', wait: 0 })).release();

    network.resetOnNextAnswer();
    const lease = await flaky.locks.tryAcquire(key, { purpose: 'correctness', ttl: 10_000 }).catch((e: unknown) => e);
    expect(network.resets).toBe(1);
    const keys = await raw.getAll().prefix(prefixOf(key)).keys();
    // Nobody else ever asked for the key: "busy" would be wrong, and the key we wrote would block it.
    expect({ lease: lease === null ? null : typeof lease, keys: keys.length }).toEqual({ lease: 'object', keys: 1 });
    expect(await other.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    await (lease as Lease).release();
    expect(await raw.getAll().prefix(prefixOf(key)).keys()).toHaveLength(0);
    const next = await other.locks.tryAcquire(key, { purpose: 'correctness' });
    expect(next).not.toBeNull();
    expect(next!.token!).toBeGreaterThan((lease as Lease).token!);
    await next!.release();
  });

  it('a queued acquire whose answer was lost to a connection reset keeps its place and gets the lock when it is free', async () => {
    const key = uniqueKey('reset-queued');
    const network = await ResettingProxy.start(etcdPort());
    cleanups.push(() => network.close());
    const flaky = await app({ hosts: network.endpoint, sessionTtlSeconds: 30 });
    const other = await app({ hosts: etcdHosts() });
    await (await flaky.locks.acquire(uniqueKey('warm-up'), { purpose: 'correctness', wait: 0 })).release();
    const holder = await other.locks.acquire(key, { purpose: 'correctness', ttl: 10_000, wait: 0 });

    network.resetOnNextAnswer();
    const waiting = flaky.locks.acquire(key, { purpose: 'correctness', ttl: 10_000, wait: 4_000 }).then(
      (lease) => lease,
      (error: unknown) => String(error),
    );
    // The enqueue's answer was lost to the reset, and its place is in the queue, before the release.
    await until(() => network.resets >= 1, 10_000, 'the reset');
    await untilQueued(other.locks, key, { purpose: 'correctness' }, 1);
    expect(network.resets).toBe(1);
    await holder.release();
    const releasedAt = performance.now();
    const waiter = await waiting;
    expect(typeof waiter === 'string' ? waiter : 'a lease').toBe('a lease');
    expect(performance.now() - releasedAt).toBeLessThan(1_000);
    expect((waiter as Lease).token!).toBeGreaterThan(holder.token!);
    await (waiter as Lease).release();
    expect(await raw.getAll().prefix(prefixOf(key)).keys()).toHaveLength(0);
  });

  // Issue 12, item 8. Passes once LeaseCore.remainingMs() takes LockBackend.validUntil into account.
  it('remainingMs() never promises more than the session lease guarantees when keep-alives are cut', async () => {
    const key = uniqueKey('remaining');
    const network = await proxy();
    const cut = await app({ hosts: network.endpoint, sessionTtlSeconds: 3, commandTimeoutMs: 500 });
    cleanups.push(() => network.heal()); // before the app closes, so its shutdown can reach etcd
    const lease = await cut.locks.acquire(key, { purpose: 'correctness', ttl: 30_000, wait: 0 });
    const lost = aborted(lease.signal);
    network.blackhole();
    const cutAt = performance.now();

    await sleep(2_500);
    // No keep-alive sent after the cut can be answered: the session vouches for at most 3 s from it.
    const sessionLeftMs = 3_000 - (performance.now() - cutAt);
    expect(lease.remainingMs()).toBeLessThanOrEqual(sessionLeftMs);

    const reason = await lost;
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(reason).toMatchObject({ reason: 'session-lost' });
    expect(performance.now() - cutAt).toBeLessThan(3_500);
    expect(lease.remainingMs()).toBe(0);
  });

  // Issue 12, item 16 (Curator's testKilledSession).
  it('a session lease revoked behind its back: the holder is told, the waiter gets the lock, new acquires work at once', async () => {
    const key = uniqueKey('killed-session');
    const { locks } = await app({ hosts: etcdHosts() });
    const holder = await locks.acquire(key, { purpose: 'correctness', ttl: 30_000, wait: 0 });
    const holderLost = aborted(holder.signal);
    // Another async context on the same instance waits for the key.
    const waiting = locks.acquire(key, { purpose: 'correctness', ttl: 30_000, wait: 15_000 }).then(
      (lease) => ({ lease }),
      (error: unknown) => ({ error }),
    );
    let kvs = (await raw.getAll().prefix(prefixOf(key)).exec()).kvs;
    for (let i = 0; i < 100 && kvs.length < 2; i++) {
      await sleep(20);
      kvs = (await raw.getAll().prefix(prefixOf(key)).exec()).kvs;
    }
    expect(kvs).toHaveLength(2); // holder and waiter, on one session lease
    const sessionLease = kvs[0].lease;
    expect(kvs[1].lease).toBe(sessionLease);

    await raw.leaseClient.leaseRevoke({ ID: sessionLease });
    const revokedAt = performance.now();

    // A new acquire on the same instance works at once.
    const fresh = await locks.acquire(uniqueKey('after-revoke'), { purpose: 'correctness', wait: 0 }).then(
      (lease) => ({ lease, ms: performance.now() - revokedAt }),
      (error: unknown) => ({ error: String(error) }),
    );
    expect(fresh).toEqual({ lease: expect.anything(), ms: expect.any(Number) });
    expect((fresh as { ms: number }).ms).toBeLessThan(1_000);
    await (fresh as { lease: Lease }).lease.release();

    // The waiter re-queues on a new session and gets the lock within its wait.
    const outcome = await waiting;
    expect(outcome).toEqual({ lease: expect.anything() });
    const waiter = (outcome as { lease: Lease }).lease;
    expect(performance.now() - revokedAt).toBeLessThan(5_000);
    expect(waiter.token!).toBeGreaterThan(holder.token!);
    expect(waiter.signal.aborted).toBe(false);

    // The holder is told its lease is gone.
    expect(await Promise.race([holderLost, sleep(1_000).then(() => 'not aborted')])).toMatchObject({ reason: 'session-lost' });
    await holder.release().catch(() => undefined);

    // The waiter's key is on the new, live session.
    const now = (await raw.getAll().prefix(prefixOf(key)).exec()).kvs;
    expect(now).toHaveLength(1);
    expect(now[0].lease).not.toBe(sessionLease);
    await waiter.release();
    expect(await raw.getAll().prefix(prefixOf(key)).keys()).toHaveLength(0);
  });

  it('keys with any well-formed Unicode, "%" and "/" lock and release; a lone surrogate is refused, never a raw URIError', async () => {
    const { locks } = await app({ hosts: etcdHosts() });
    for (const name of ['emoji-😀', '漢字/かな', '100%', 'a/b%2Fc', ' \u0000 ']) {
      const key = uniqueKey(name);
      const lease = await locks.acquire(key, { purpose: 'correctness', wait: 0 });
      expect(await raw.getAll().prefix(prefixOf(key)).keys()).toHaveLength(1);
      await lease.release();
      expect(await raw.getAll().prefix(prefixOf(key)).keys()).toHaveLength(0);
    }
    // The backend itself, below the options layer.
    const backend = new EtcdBackend({ client: raw as never, ownsClient: false });
    cleanups.push(() => backend.close());
    const error = await backend.acquire({ key: 'lone-\uD800', owner: 'o1', ttlMs: 1_000, queue: false }).catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(URIError);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
  });
});
