import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review: one key of a multi-key lease force-released. The whole lease is lost (as
// promised), but the engine treats a 'force-released' loss as "nothing of ours is left on the
// server" and forgets the lease — true for one key, not for the OTHER keys of a multi-key lease.
// On etcd those keys ride the session lease: unless the holder happens to call release() on its
// lost lease, they stay held for as long as its application runs (not its ttl), owned by nobody.

describe('force-released key of a multi-key lease on etcd', () => {
  let a: LockApp;
  let c: LockApp;
  const opts = (more: object = {}) => ({ purpose: 'correctness' as const, backend: 'etcd', ...more });
  beforeAll(async () => {
    const o = { etcd: { hosts: etcdHosts() } };
    [a, c] = await Promise.all([startLockApp(o), startLockApp(o)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, c]) await app?.close();
  });

  it("the lease's other keys are free again within its ttl after the loss, even if nobody calls release()", async () => {
    const [k1, k2] = ['1', '2'].map((n) => uniqueKey(`rv-mk-force-orphan-${n}`));
    const lease = await a.locks.acquire([k1, k2], opts({ ttl: 1_500 }));
    expect(await c.locks.forceRelease(k2, { backend: 'etcd' })).toBe(true);
    const deadline = Date.now() + 5_000;
    while (!lease.signal.aborted && Date.now() < deadline) await sleep(10);
    expect(lease.signal.aborted).toBe(true);
    // A lost lease: its holder stops (like the README's campaign loop, it does not release it).
    await sleep(4_500);
    const info = await c.locks.inspect(k1, { backend: 'etcd' });
    const probe = await c.locks.tryAcquire(k1, opts());
    await probe?.release();
    await lease.release().catch(() => undefined);
    expect({ info, free: probe !== null }).toEqual({ info: null, free: true });
  }, 30_000);
});
