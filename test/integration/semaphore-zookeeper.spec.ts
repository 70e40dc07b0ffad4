import zookeeper from 'node-zookeeper-client';
import type { Lease } from '../../lib/index.js';
import { watchConnection } from '../../lib/backends/zookeeper/zookeeper-connection.js';
import { describeSemaphore } from '../harness/semaphore-contract.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';

// ZooKeeper's semaphores: the contract, then what only this backend can get wrong — the race for
// the last permits (every acquirer decides from its own read of the line), a holder's session
// ending without a release, a grant answered after the engine gave up, and znode names.

describeSemaphore({
  backend: 'zookeeper',
  purpose: 'correctness',
  fencing: true,
  server: async () => {
    const zk = await ZooKeeperServer.start();
    return { options: { zookeeper: { connectionString: zk.connectionString, sessionTimeoutMs: 4_000 } }, stop: () => zk.stop() };
  },
});

type RawClient = ReturnType<typeof zookeeper.createClient>;
const raw = <T>(fn: (cb: (error: Error | null, value: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((error, value) => (error ? reject(error) : resolve(value))));

async function rawClient(connectionString: string): Promise<RawClient> {
  const client = zookeeper.createClient(connectionString, { sessionTimeout: 4_000, spinDelay: 100 });
  client.connect();
  await new Promise((resolve) => client.once('connected', resolve));
  return client;
}

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(20);
  }
}

describe('ZooKeeper semaphores: races, dead sessions, late answers', () => {
  let server: ZooKeeperServer;
  let inspector: RawClient;
  let unwatch: (() => void) | undefined;
  const apps: LockApp[] = [];
  const start = async (options: Record<string, unknown> = {}): Promise<LockApp> => {
    const app = await startLockApp({ zookeeper: { connectionString: server.connectionString, sessionTimeoutMs: 4_000, ...options } });
    apps.push(app);
    return app;
  };
  const line = (key: string): Promise<string[]> =>
    raw<string[]>((cb) => inspector.getChildren(`/nest-distributed-lock/${encodeURIComponent(key).replaceAll('.', '%2E')}`, cb)).catch((e: { code?: number }) => {
      if (e.code === -101) return [];
      throw e;
    });
  const opts = (permits: number, more: object = {}) => ({ purpose: 'correctness' as const, permits, ...more });

  beforeAll(async () => {
    server = await ZooKeeperServer.start();
    inspector = await rawClient(server.connectionString);
    unwatch = watchConnection(inspector);
  }, 60_000);
  afterAll(async () => {
    unwatch?.();
    inspector?.close();
    for (const app of apps) await app.close();
    await server?.stop();
  });

  it('20 tryAcquire racing from 3 applications for permits 3: exactly 3 leases, distinct tokens, no znode of the refused left', async () => {
    const [a, b, c] = await Promise.all([start(), start(), start()]);
    for (let round = 0; round < 3; round++) {
      const key = uniqueKey('zk-sem-race');
      const tries = Array.from({ length: 20 }, (_, i) => [a, b, c][i % 3].locks.tryAcquire(key, opts(3, { ttl: 20_000 })));
      const leases = (await Promise.all(tries)).filter((lease): lease is Lease => lease !== null);
      expect(leases).toHaveLength(3);
      expect(new Set(leases.map((lease) => lease.token)).size).toBe(3);
      expect(await line(key)).toHaveLength(3);
      for (const lease of leases) await lease.release();
      expect(await line(key)).toEqual([]);
    }
  }, 60_000);

  it('queued acquirers racing: never more than `permits` at once, all served, each token larger than those released before it asked', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const key = uniqueKey('zk-sem-queue');
    let running = 0;
    let most = 0;
    const released: bigint[] = [];
    const tokens = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        await sleep(Math.floor(Math.random() * 300));
        const before = [...released];
        const lease = await (i % 2 ? a : b).locks.acquire(key, opts(2, { ttl: 20_000, wait: 30_000 }));
        for (const token of before) expect(lease.token! > token).toBe(true);
        running++;
        most = Math.max(most, running);
        await sleep(40);
        running--;
        await lease.release();
        released.push(lease.token!);
        return lease.token!;
      }),
    );
    expect(most).toBe(2);
    expect(new Set(tokens).size).toBe(12);
    expect(await line(key)).toEqual([]);
  }, 60_000);

  it("a holder whose session ends without a release (its client closed behind the engine's back): its permit goes at once to the waiter", async () => {
    const own = await rawClient(server.connectionString);
    const doomed = await startLockApp({ zookeeper: { client: own } });
    apps.push(doomed);
    const other = await start();
    const key = uniqueKey('zk-sem-dead');
    const held = await doomed.locks.acquire(key, opts(2, { ttl: 60_000 }));
    const kept = await other.locks.acquire(key, opts(2, { ttl: 60_000 }));
    const waiting = other.locks.acquire(key, opts(2, { ttl: 60_000, wait: 20_000 }));
    await eventually(async () => (await line(key)).length === 3, 5_000, 'waiter queued');
    const closedAt = Date.now();
    own.close();
    const next = await waiting;
    expect(Date.now() - closedAt).toBeLessThan(3_000);
    expect(next.token! > kept.token!).toBe(true);
    await eventually(() => held.signal.aborted, 10_000, 'the dead holder told');
    expect(kept.signal.aborted).toBe(false);
    await next.release();
    await kept.release();
  }, 30_000);

  it('a grant answered after the engine gave up on the attempt is given back: no permit left held', async () => {
    const own = await rawClient(server.connectionString);
    let slowMs = 0;
    // The answers to reads of the line come late (a client busy elsewhere): the grant lands after the caller's signal.
    const slowed = new Proxy(own, {
      get(target, prop) {
        const value = (target as never)[prop] as unknown;
        if (typeof value !== 'function') return value;
        if (prop !== 'getChildren') return value.bind(target);
        return (...args: any[]) => {
          const callback = args.pop();
          const ms = slowMs;
          return (value as (...a: unknown[]) => unknown).call(target, ...args, (...answer: unknown[]) => (ms > 0 ? setTimeout(() => callback(...answer), ms) : callback(...answer)));
        };
      },
    });
    const app = await startLockApp({ zookeeper: { client: slowed, commandTimeoutMs: 5_000 } });
    apps.push(app);
    const other = await start();
    const key = uniqueKey('zk-sem-late');
    try {
      await (await app.locks.acquire(key, opts(2))).release(); // the line's parent and the session exist
      slowMs = 800;
      const gaveUp = await app.locks.acquire(key, opts(2, { signal: AbortSignal.timeout(200) })).catch((e: unknown) => e);
      expect((gaveUp as Error).name).toBe('TimeoutError');
      // The attempt's znode is there, its grant still on the way back.
      expect(await line(key)).toHaveLength(1);
      await eventually(async () => (await line(key)).length === 0, 5_000, 'the late grant given back');
      slowMs = 0;
      const both = [await other.locks.acquire(key, opts(2, { wait: 0 })), await other.locks.acquire(key, opts(2, { wait: 0 }))];
      for (const lease of both) await lease.release();
    } finally {
      own.close();
    }
  }, 30_000);

  it('names its znodes <owner>%S<permits>-<sequence>; keys with braces, colons and non-ASCII are distinct semaphores', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const base = uniqueKey('zk-sem-名前');
    const keys = [`{${base}}:a`, `${base}/b.c`, `${base}:ü✓`];
    const leases: Lease[] = [];
    for (const key of keys) {
      leases.push(await a.locks.acquire(key, opts(2)), await b.locks.acquire(key, opts(2)));
      expect(await b.locks.tryAcquire(key, opts(2))).toBeNull();
      const children = await line(key);
      expect(children).toHaveLength(2);
      for (const child of children) expect(child).toMatch(/%S2-\d{10}$/);
      expect(await a.locks.inspect(key, { backend: 'zookeeper' })).toMatchObject({ permits: 2, holders: 2, waiters: 0 });
    }
    for (const lease of leases) await lease.release();
    for (const key of keys) expect(await line(key)).toEqual([]);
  }, 30_000);
});
