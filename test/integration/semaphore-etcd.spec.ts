import { Etcd3 } from 'etcd3';
import { InvalidLockOptionsError, type Lease } from '../../lib/index.js';
import { describeSemaphore } from '../harness/semaphore-contract.js';
import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// The contract on etcd (three applications, three clients, one etcd), then what is etcd's own:
// a dead process's permit, a race for the last permits, answers that come after the caller left.
describeSemaphore({
  backend: 'etcd',
  purpose: 'correctness',
  fencing: true,
  server: async () => ({ options: { etcd: { hosts: etcdHosts() } }, stop: async () => undefined }),
});

const opts = (permits: number, more: object = {}) => ({ purpose: 'correctness' as const, backend: 'etcd', permits, ...more });
const prefixOf = (key: string): string => `lock/${encodeURIComponent(key)}/`;

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(10);
  }
}

describe('etcd semaphores: what the server sees', () => {
  const apps: LockApp[] = [];
  let raw: Etcd3;
  let a: LockApp;
  let b: LockApp;
  let c: LockApp;
  const entries = async (key: string): Promise<string[]> => Object.keys(await raw.getAll().prefix(prefixOf(key)).strings());
  beforeAll(async () => {
    raw = new Etcd3({ hosts: etcdHosts() });
    for (let i = 0; i < 3; i++) apps.push(await startLockApp({ etcd: { hosts: etcdHosts() } }));
    [a, b, c] = apps;
  }, 60_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    raw.close();
  });

  it("frees a dead process's permit when its session lease expires, and wakes the waiter then (a watch, not the 5 s re-check)", async () => {
    const key = uniqueKey('sem-dead');
    // A process that died holding a permit: its entry on a lease nobody keeps alive.
    const lease = raw.lease(2, { autoKeepAlive: false });
    const leaseId = await lease.grant();
    await raw.put(`${prefixOf(key)}dead-owner`).value('2').lease(leaseId);
    const live = await a.locks.acquire(key, opts(2, { ttl: 30_000 }));
    let admittedAt = 0;
    const waiting = b.locks.acquire(key, opts(2, { ttl: 30_000, wait: 15_000 })).then((held) => {
      admittedAt = Date.now();
      return held;
    });
    expect(await c.locks.inspect(key, { backend: 'etcd' })).toMatchObject({ permits: 2, holders: 2 });
    await eventually(async () => !(await entries(key)).some((k) => k.endsWith('dead-owner')), 10_000, 'the dead lease expired');
    const goneAt = Date.now();
    const next = await waiting;
    expect(admittedAt - goneAt).toBeLessThan(1_500);
    expect(next.token! > live.token!).toBe(true);
    await next.release();
    await live.release();
    expect(await entries(key)).toEqual([]);
  }, 30_000);

  it('never admits more than `permits` when many race for them: 20 single tries from 3 apps, exactly 3 leases, nothing left of the others', async () => {
    const key = uniqueKey('sem-race');
    const tries = Array.from({ length: 20 }, (_, i) => apps[i % 3].locks.tryAcquire(key, opts(3, { ttl: 20_000 })));
    const leases = (await Promise.all(tries)).filter((l): l is Lease => l !== null);
    expect(leases).toHaveLength(3);
    await eventually(async () => (await entries(key)).length === 3, 5_000, 'refused tries deleted their entries');
    const tokens = leases.map((l) => l.token!);
    expect(new Set(tokens.map(String)).size).toBe(3);
    for (const lease of leases) await lease.release();
    expect(await entries(key)).toEqual([]);
  }, 30_000);

  it('runs at most `permits` at once when 12 callers from 3 apps queue; a token is larger than any of a lease given back before the call', async () => {
    const key = uniqueKey('sem-queue');
    let running = 0;
    let most = 0;
    const released: bigint[] = [];
    const tokens: bigint[] = [];
    const work = Array.from({ length: 12 }, async (_, i) => {
      // Staggered arrivals, so that some calls start after others gave their permits back.
      await sleep(i * 25);
      const before = [...released];
      const lease = await apps[i % 3].locks.acquire(key, opts(3, { ttl: 20_000, wait: 20_000 }));
      for (const token of before) expect(lease.token! > token).toBe(true);
      tokens.push(lease.token!);
      running++;
      most = Math.max(most, running);
      await sleep(40);
      running--;
      await lease.release();
      released.push(lease.token!);
    });
    await Promise.all(work);
    expect(most).toBeLessThanOrEqual(3);
    expect(new Set(tokens.map(String)).size).toBe(12);
    expect(await entries(key)).toEqual([]);
  }, 30_000);

  it('leaves no permit held and no queue entry when the caller gave up while its answer was on the way', async () => {
    const key = uniqueKey('sem-late');
    const giveUps = async (): Promise<void> => {
      for (let i = 0; i < 15; i++) {
        // Aborts after 0–3 ms: before the request is sent, while it is in flight, or while queued.
        const signal = AbortSignal.timeout(i % 4);
        await b.locks.acquire(key, opts(2, { ttl: 20_000, wait: 5_000, signal })).then(
          (lease) => lease.release(),
          () => undefined,
        );
      }
    };
    // A permit free: the answers that came too late are grants.
    const holder = await a.locks.acquire(key, opts(2, { ttl: 20_000 }));
    await giveUps();
    await eventually(async () => (await entries(key)).length === 1, 5_000, "only the holder's entry left");
    // Every permit taken: they are places in line.
    const second = await c.locks.tryAcquire(key, opts(2, { ttl: 20_000 }));
    expect(second).not.toBeNull();
    await giveUps();
    await eventually(async () => (await entries(key)).length === 2, 5_000, "only the holders' entries left");
    await second!.release();
    const third = await c.locks.tryAcquire(key, opts(2, { ttl: 20_000 }));
    expect(third).not.toBeNull();
    await third!.release();
    await holder.release();
    expect(await entries(key)).toEqual([]);
  }, 30_000);

  it("refuses a plain caller on a semaphore's key on every path (single try, queued), leaving nothing behind", async () => {
    const key = uniqueKey('sem-plain');
    const one = await a.locks.acquire(key, opts(2, { ttl: 20_000 }));
    const two = await a.locks.acquire(key, opts(2, { ttl: 20_000 }));
    // b has not seen the key busy: its single try reads the oldest entry on its own; then the txn carries the read.
    await expect(b.locks.tryAcquire(key, { purpose: 'correctness', backend: 'etcd' })).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(b.locks.tryAcquire(key, { purpose: 'correctness', backend: 'etcd' })).rejects.toMatchObject({ field: 'permits' });
    // Queued: the lean txn first (c has not seen it busy), then the full one, which puts, sees, deletes.
    await expect(c.locks.acquire(key, { purpose: 'correctness', backend: 'etcd', wait: 2_000 })).rejects.toMatchObject({ field: 'permits' });
    await expect(c.locks.acquire(key, { purpose: 'correctness', backend: 'etcd', wait: 2_000 })).rejects.toMatchObject({ field: 'permits' });
    await expect(c.locks.acquire(key, opts(3, { wait: 2_000 }))).rejects.toMatchObject({ field: 'permits' });
    expect((await entries(key)).length).toBe(2);
    expect(one.signal.aborted || two.signal.aborted).toBe(false);
    await one.release();
    await two.release();
  }, 30_000);

  it('lets a forced release end holders in another process and reports the holder ending last', async () => {
    const key = uniqueKey('sem-inspect');
    const one = await a.locks.acquire(key, opts(3, { ttl: 20_000 }));
    const two = await b.locks.acquire(key, opts(3, { ttl: 20_000 }));
    const info = await a.locks.inspect(key, { backend: 'etcd' });
    expect(info).toMatchObject({ permits: 3, holders: 2, waiters: 0 });
    expect(info!.remainingMs).toBeGreaterThan(0);
    expect(await c.locks.forceRelease(key, { backend: 'etcd' })).toBe(true);
    await eventually(() => one.signal.aborted && two.signal.aborted, 5_000, 'both holders told');
    expect(await entries(key)).toEqual([]);
    expect(await c.locks.inspect(key, { backend: 'etcd' })).toBeNull();
  }, 30_000);
});
