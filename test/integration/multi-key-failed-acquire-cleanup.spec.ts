import { etcdHosts, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';

// Adversarial review: a multi-key acquisition that FAILS (rejects) after it took its first keys
// must leave none of them held ("all or nothing").

// Every backend that queues and serves semaphores (the refusal below needs them).
const CASES = EVERY_BACKEND.filter((c) => c.semaphores);

describe.each(CASES)('failed multi-key acquisition on $name', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let a: LockApp;
  let b: LockApp;
  let c: LockApp;
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  beforeAll(async () => {
    running = await server();
    const o = running.options;
    [a, b, c] = await Promise.all([startLockApp(o), startLockApp(o), startLockApp(o)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b, c]) await app?.close();
    await running?.stop();
  });

  it('a later key held as a semaphore: the acquisition is refused and leaves the earlier key free', async () => {
    const k1 = uniqueKey(`rv-mk-leak-${backend}-1`);
    const k2 = uniqueKey(`rv-mk-leak-${backend}-2`);
    // k2 is a semaphore of 3 permits, held by one holder: a plain lock on it is a permits mismatch.
    const sem = await a.locks.acquire(k2, opts({ permits: 3, ttl: 20_000 }));
    // The first attempt takes k1, then finds the semaphore on k2 (acquire() reports the holder).
    const outcome = await b.locks.acquire([k1, k2], opts({ ttl: 20_000, wait: 1_000 })).then(
      (lease) => ({ lease }),
      (error: unknown) => ({ error }),
    );
    expect(outcome).toMatchObject({ error: { field: 'permits' } });
    // All or nothing: k1 must be free for a third application right away.
    const info = await c.locks.inspect(k1, { backend });
    const probe = await c.locks.tryAcquire(k1, opts());
    await probe?.release();
    await sem.release();
    expect(info).toBeNull();
    expect(probe).not.toBeNull();
  }, 30_000);
});

describe('failed multi-key acquisition on etcd (orphan lives with the session)', () => {
  let a: LockApp;
  let b: LockApp;
  let c: LockApp;
  const opts = (more: object = {}) => ({ purpose: 'correctness' as const, backend: 'etcd', ...more });
  beforeAll(async () => {
    const o = { etcd: { hosts: etcdHosts() } };
    [a, b, c] = await Promise.all([startLockApp(o), startLockApp(o), startLockApp(o)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b, c]) await app?.close();
  });

  it('the key the failed attempt took is still held three ttls later (nobody owns it, nothing ends it)', async () => {
    const k1 = uniqueKey('rv-mk-orphan-1');
    const k2 = uniqueKey('rv-mk-orphan-2');
    const sem = await a.locks.acquire(k2, opts({ permits: 3, ttl: 20_000 }));
    await expect(b.locks.acquire([k1, k2], opts({ ttl: 1_500, wait: 1_000 }))).rejects.toMatchObject({ field: 'permits' });
    await sem.release();
    await new Promise((r) => setTimeout(r, 4_500));
    const probe = await c.locks.tryAcquire(k1, opts());
    await probe?.release();
    expect(probe).not.toBeNull();
  }, 30_000);
});
