import { Cluster, Redis } from 'ioredis';
import { LockBackendUnavailableError, RedisBackend, type Lease } from '../../lib/index.js';
import { redisUrl, sleep, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';

// Issue 33: a process's first waiter lost its place in line. The Redis backend sent a process's
// first queue request only after its wake-up subscriber was up — a duplicate connection, on a
// Cluster client `CLUSTER SLOTS` first, then SUBSCRIBE: ~15 ms usually, more under load — so a
// warm process's waiter that asked after it was queued before it. Here the subscriber is a
// stepped one: its SUBSCRIBE waits for the spec to let it through (a gate on the application's
// own client's duplicate), so the order is decided by the product alone, never by timing.
//
// What a user sees: B's cold waiter asks first, A's warm one second, the holder releases — B gets
// the key, A still waits. And while B is queued but not yet listening, the hand-off to it is
// published to nobody: B must still get the key as soon as it listens (it looks again), not wait
// for its next poll; a subscriber that fails gives B's place in line back at once.

type Client = Redis | Cluster;

/** `client`, its subscriber's SUBSCRIBE held until `open()` (or failed by `refuse()`). */
function stepped(client: Client): { client: Client; open(): void; refuse(): void; asked: () => boolean } {
  let release!: (ok: boolean) => void;
  const gate = new Promise<boolean>((resolve) => (release = resolve));
  let asked = false;
  const duplicate = client.duplicate.bind(client) as (...args: unknown[]) => Client;
  (client as unknown as { duplicate: (...args: unknown[]) => Client }).duplicate = (...args: unknown[]) => {
    const subscriber = duplicate(...args);
    const subscribe = subscriber.subscribe.bind(subscriber) as (...a: unknown[]) => Promise<unknown>;
    (subscriber as unknown as { subscribe: (...a: unknown[]) => Promise<unknown> }).subscribe = async (...a: unknown[]) => {
      asked = true;
      if (!(await gate)) throw new Error('SUBSCRIBE refused by the spec');
      return subscribe(...a);
    };
    return subscriber;
  };
  return { client, open: () => release(true), refuse: () => release(false), asked: () => asked };
}


/** A promise's outcome, readable at any moment. */
function watch<T>(promise: Promise<T>): { settled: () => boolean; result: Promise<T> } {
  let settled = false;
  const result = promise.finally(() => void (settled = true));
  result.catch(() => undefined);
  return { settled: () => settled, result };
}

interface Topology {
  name: string;
  start(): Promise<{ client: () => Client; stop(): Promise<void> }>;
}

const TOPOLOGIES: Topology[] = [
  {
    name: 'standalone Redis',
    start: async () => ({ client: () => new Redis(redisUrl()), stop: async () => undefined }),
  },
  {
    name: 'Redis Cluster (one node owning every slot)',
    start: async () => {
      const server = await RedisServer.start({ cluster: true });
      const admin = new Redis(server.url);
      await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
      for (let i = 0; i < 200 && !String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'); i++) await sleep(25);
      admin.disconnect();
      return { client: () => new Cluster([{ host: '127.0.0.1', port: server.port }]), stop: () => server.stop() };
    },
  },
  {
    name: 'Redis through Sentinel',
    start: async () => {
      const master = await RedisServer.start();
      const sentinel = await RedisServer.startSentinel(master);
      return {
        client: () => new Redis({ sentinels: [{ host: '127.0.0.1', port: sentinel.port }], name: 'mymaster' }),
        stop: async () => {
          await sentinel.stop();
          await master.stop();
        },
      };
    },
  },
];

describe.each(TOPOLOGIES)('a process\'s first waiter keeps its place in line ($name)', ({ start }) => {
  let topology: Awaited<ReturnType<Topology['start']>>;
  const clients: Client[] = [];
  const apps: LockApp[] = [];
  // Backends the spec makes itself: the module never closes a backend the application passed in.
  const backends: RedisBackend[] = [];
  const opts = { purpose: 'efficiency' as const, ttl: 10_000 };

  beforeAll(async () => {
    topology = await start();
  }, 60_000);
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    // Its wake-up subscriber (a duplicate of the client) would otherwise reconnect for ever once the
    // server stops: 229 timers and a MaxListenersExceededWarning, and a jest worker that would not exit.
    for (const backend of backends.splice(0)) await backend.close();
    for (const client of clients.splice(0)) client.disconnect();
  });
  afterAll(async () => {
    await topology?.stop();
  });

  /** A warm application (it has held a lock, so it listens already) and a cold one whose subscriber is stepped. */
  async function pair(): Promise<{ warm: LockApp; cold: LockApp; gate: ReturnType<typeof stepped> }> {
    const warmClient = topology.client();
    const gate = stepped(topology.client());
    clients.push(warmClient, gate.client);
    const warm = await startLockApp({ redis: { client: warmClient } });
    // The cold one polls only every 10 s (its waiter heartbeat, which also covers a lost wake-up):
    // only its looking again once it listens can serve it within the 2 s the spec allows.
    const coldBackend = new RedisBackend({ client: gate.client, ownsClient: false, waiterHeartbeatMs: 10_000 });
    backends.push(coldBackend);
    const cold = await startLockApp({ backends: { redis: coldBackend } });
    apps.push(warm, cold);
    await (await warm.locks.acquire(uniqueKey('warm-up'), opts)).release();
    return { warm, cold, gate };
  }

  const waiters = async (app: LockApp, key: string): Promise<number> => (await app.locks.inspect(key, { backend: 'redis' }))?.waiters ?? 0;

  it('asks first, is served first: queued before its subscriber is up, handed the key once it listens', async () => {
    const { warm, cold, gate } = await pair();
    const key = uniqueKey('first-waiter');
    const holder = await warm.locks.acquire(key, opts);
    const first = watch(cold.locks.acquire(key, { ...opts, wait: 15_000 }));
    // Queued on the server while its SUBSCRIBE is still held (before: nothing was sent until it went through).
    await until(async () => (await waiters(warm, key)) === 1, 3_000, 'the cold waiter queued');
    expect(gate.asked()).toBe(true);
    const second = watch(warm.locks.acquire(key, { ...opts, wait: 15_000 }));
    await until(async () => (await waiters(warm, key)) === 2, 3_000, 'the warm waiter queued behind it');
    // The hand-off to the cold waiter is published while it does not listen yet.
    await holder.release();
    await sleep(100);
    expect(first.settled()).toBe(false);
    expect(second.settled()).toBe(false);
    gate.open();
    const started = Date.now();
    const lease: Lease = await first.result;
    // It looked again once it listened: at once, not at its next poll.
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(second.settled()).toBe(false);
    expect(await warm.locks.tryAcquire(key, opts)).toBeNull();
    await lease.release();
    await (await second.result).release();
    expect(await warm.locks.inspect(key, { backend: 'redis' })).toBeNull();
  }, 30_000);

  it('a subscriber that fails: the waiter is refused and its place in line given back at once', async () => {
    const { warm, cold, gate } = await pair();
    const key = uniqueKey('first-waiter-refused');
    const holder = await warm.locks.acquire(key, opts);
    const first = watch(cold.locks.acquire(key, { ...opts, wait: 15_000 }));
    await until(() => gate.asked(), 3_000, 'the cold waiter asking to subscribe');
    gate.refuse();
    await expect(first.result).rejects.toBeInstanceOf(LockBackendUnavailableError);
    // Not left in the queue ahead of the next waiter (its entry would otherwise hold the key for its whole life).
    expect(await waiters(warm, key)).toBe(0);
    const second = watch(warm.locks.acquire(key, { ...opts, wait: 15_000 }));
    await until(async () => (await waiters(warm, key)) === 1, 3_000, 'the warm waiter queued');
    await holder.release();
    await (await second.result).release();
  }, 30_000);

  it('a semaphore\'s first waiter too: queued before its subscriber is up, served first', async () => {
    const { warm, cold, gate } = await pair();
    const key = uniqueKey('first-waiter-semaphore');
    const sem = { ...opts, permits: 2 };
    const holders = [await warm.locks.acquire(key, sem), await warm.locks.acquire(key, sem)];
    const first = watch(cold.locks.acquire(key, { ...sem, wait: 15_000 }));
    await until(async () => (await waiters(warm, key)) === 1, 3_000, 'the cold waiter queued');
    const second = watch(warm.locks.acquire(key, { ...sem, wait: 15_000 }));
    await until(async () => (await waiters(warm, key)) === 2, 3_000, 'the warm waiter queued behind it');
    await holders[0].release();
    await sleep(100);
    expect(first.settled()).toBe(false);
    gate.open();
    const started = Date.now();
    const lease = await first.result;
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(second.settled()).toBe(false);
    await holders[1].release();
    await (await second.result).release();
    await lease.release();
  }, 30_000);
});
