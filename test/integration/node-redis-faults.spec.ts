import { Redis } from 'ioredis';
import { Cluster } from 'ioredis';
import { createClient, createCluster, createSentinel } from 'redis';
import { createCluster as createCluster5 } from 'redis5';
import { InvalidLockOptionsError, LockBackendUnavailableError } from '../../lib/index.js';
import { startRedisCluster } from '../harness/redis-cluster.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { redisUrl, sleep, startLockApp, uniqueKey, until, untilQueued, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';
import { LockWorker } from '../harness/worker.js';

// The Redis backend on the application's node-redis client, where node-redis differs from ioredis:
// its writes leave at the next setImmediate (a handed-off holder busy right after its grant), it
// never resends a written command, it renews subscriptions itself after a reconnection, and its
// server may have lost the scripts (restart, SCRIPT FLUSH). Real servers, a real second process.

const nodeRedis = (url: string) => createClient({ url, socket: { reconnectStrategy: 50 } });
type NodeRedis = ReturnType<typeof nodeRedis>;
const opts = { purpose: 'efficiency' as const };

describe('Redis backend on node-redis: faults', () => {
  const clients: Array<{ isOpen: boolean; destroy(): void }> = [];
  const apps: LockApp[] = [];
  const workers: LockWorker[] = [];
  const connected = async (url: string): Promise<NodeRedis> => {
    const client = nodeRedis(url).on('error', () => undefined);
    clients.push(client);
    return client.connect();
  };
  const connectedWith = async (options: Parameters<typeof createClient>[0]): Promise<unknown> => {
    const client = createClient(options).on('error', () => undefined);
    clients.push(client);
    return client.connect();
  };
  const app = async (client: unknown, extra: Record<string, unknown> = {}): Promise<LockApp> => {
    const started = await startLockApp({ redis: { client: client as never, ...extra } });
    apps.push(started);
    return started;
  };
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill9()));
    for (const a of apps.splice(0)) await a.close();
    for (const c of clients.splice(0)) if (c.isOpen) c.destroy();
  });

  it('a holder whose event loop is busy right after a hand-off keeps the key for its ttl (node-redis writes at the next setImmediate)', async () => {
    const raw = new Redis(redisUrl());
    try {
      const key = uniqueKey('nr-busy-after-hand-off');
      const queue = (): Promise<string[]> => raw.lrange(`lock:{${key}}:q2`, 0, -1);
      const [a, c] = [await app(await connected(redisUrl())), await app(await connected(redisUrl()))];
      const holder = await a.locks.acquire(key, { ...opts, ttl: 10_000 });
      const worker = await LockWorker.start({ redisUrl: redisUrl(), redisClient: 'node-redis' });
      workers.push(worker);
      worker.send({ op: 'acquire', key, ttl: 10_000, wait: 10_000, busyMs: 2_500 });
      await worker.next('waiting');
      await until(async () => (await queue()).length === 1, 5_000, 'the worker queued');
      let cHolds = false;
      const waiting = c.locks.acquire(key, { ...opts, ttl: 10_000, wait: 20_000 }).then((lease) => ((cHolds = true), lease));
      await until(async () => (await queue()).length === 2, 5_000, 'C queued behind it');
      await holder.release(); // a 1.5 s reservation for a 10 s ttl: the worker must claim before its 2.5 s of work
      await worker.next('acquired', 10_000);
      expect(cHolds).toBe(false);
      await sleep(300);
      expect(cHolds).toBe(false);
      worker.send({ op: 'release' });
      await worker.next('released');
      await (await waiting).release();
    } finally {
      raw.disconnect();
    }
  }, 30_000);

  it('fails fast while its server is down (kill -9), and after the restart locks, queues and hands off by message again', async () => {
    const server = await RedisServer.start();
    try {
      const [a, b] = [await app(await connected(server.url), { connectTimeoutMs: 500, commandTimeoutMs: 500 }), await app(await connected(server.url), { connectTimeoutMs: 500, commandTimeoutMs: 500 })];
      // Both wake channels open before the fault: after it, only node-redis' own re-subscription brings them back.
      const before = uniqueKey('nr-before');
      const first = await a.locks.acquire(before, { ...opts, ttl: 5_000 });
      const queued = b.locks.acquire(before, { ...opts, ttl: 5_000, wait: 5_000 });
      await untilQueued(b.locks, before, opts, 1);
      await first.release();
      await (await queued).release();

      await server.kill9();
      const started = performance.now();
      const error = await a.locks.tryAcquire(uniqueKey('nr-down'), opts).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockBackendUnavailableError);
      expect(performance.now() - started).toBeLessThan(1_500);

      await server.restart();
      const key = uniqueKey('nr-after');
      let held: Awaited<ReturnType<LockApp['locks']['acquire']>> | undefined;
      for (const deadline = Date.now() + 10_000; !held && Date.now() < deadline; ) {
        held = await a.locks.acquire(key, { ...opts, ttl: 5_000, wait: 0 }).catch(() => undefined);
        if (!held) await sleep(50);
      }
      expect(held).toBeDefined();
      const waiting = b.locks.acquire(key, { ...opts, ttl: 5_000, wait: 5_000 });
      await untilQueued(b.locks, key, opts, 1);
      // Let node-redis renew B's subscription (it does so as it reconnects), then hand off.
      await sleep(200);
      const released = performance.now();
      await held!.release();
      await (await waiting).release();
      expect(performance.now() - released).toBeLessThan(400); // a waiter looks by itself only every 500 ms
    } finally {
      await server.stop();
    }
  }, 40_000);

  it('runs its scripts again after the server lost them (SCRIPT FLUSH): NOSCRIPT answered by EVAL', async () => {
    const client = await connected(redisUrl());
    const a = await app(client);
    const key = uniqueKey('nr-noscript');
    (await a.locks.acquire(key, { ...opts, ttl: 5_000 })).release();
    await client.sendCommand(['SCRIPT', 'FLUSH']);
    const lease = await a.locks.acquire(key, { ...opts, ttl: 5_000 });
    await lease.extend(5_000);
    await lease.release();
    expect(await client.sendCommand(['EXISTS', `lock:{${key}}`])).toBe(0);
  });

  it('locks through a node-redis Sentinel client on the master it finds', async () => {
    const master = await RedisServer.start();
    const sentinel = await RedisServer.startSentinel(master);
    try {
      const open = async (): Promise<unknown> => {
        const client = createSentinel({ name: 'mymaster', sentinelRootNodes: [{ host: '127.0.0.1', port: sentinel.port }] }).on('error', () => undefined);
        clients.push(client as never);
        return client.connect();
      };
      const [a, b] = [await app(await open()), await app(await open())];
      const key = uniqueKey('nr-sentinel');
      const held = await a.locks.acquire(key, { ...opts, ttl: 5_000 });
      expect(await b.locks.tryAcquire(key, opts)).toBeNull();
      const waiting = b.locks.acquire(key, { ...opts, ttl: 5_000, wait: 5_000 });
      await untilQueued(b.locks, key, opts, 1);
      await held.release();
      await (await waiting).release();
      const raw = new Redis(master.url);
      try {
        expect(await raw.exists(`lock:{${key}}`)).toBe(0);
        expect(Number(/keyspace_hits:(\d+)/.exec(await raw.info('stats'))?.[1] ?? 0)).toBeGreaterThan(0); // the master served it
      } finally {
        raw.disconnect();
      }
    } finally {
      // The applications and their clients first: a Sentinel client whose servers are gone keeps
      // re-discovering them (its timers) until it is destroyed.
      for (const a of apps.splice(0)) await a.close();
      for (const c of clients.splice(0)) await (c as unknown as { destroy(): Promise<void> | void }).destroy();
      await sentinel.stop();
      await master.stop();
    }
  }, 30_000);

  it('app.close() while the wake-up subscriber of a node-redis 5 Cluster is still discovering leaves no connection behind (review finding)', async () => {
    const cluster = await startRedisCluster(3);
    const proxy = await TcpProxy.start(cluster.nodes[0]!.port);
    const ports = new Set(cluster.nodes.map((n) => n.port));
    const ours = (): number =>
      (process as unknown as { _getActiveHandles(): Array<{ remotePort?: number; destroyed?: boolean }> })._getActiveHandles().filter((h) => h.remotePort !== undefined && !h.destroyed && (ports.has(h.remotePort) || h.remotePort === proxy.port)).length;
    try {
      const appClient = await createCluster5({ rootNodes: [{ url: `redis://${proxy.endpoint}` }] }).on('error', () => undefined).connect();
      const a = await app(appClient, { connectTimeoutMs: 300, commandTimeoutMs: 300 });
      const other = await createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${cluster.nodes[1]!.port}` }] }).on('error', () => undefined).connect();
      const b = await app(other);
      const key = uniqueKey('nr5-discovering');
      const held = await b.locks.acquire(key, { ...opts, ttl: 5_000 });
      proxy.blackhole(); // the root node stops answering: the subscriber's discovery hangs there
      await expect(a.locks.acquire(key, { ...opts, ttl: 5_000, wait: 3_000 })).rejects.toBeInstanceOf(LockBackendUnavailableError);
      await held.release();
      for (const x of apps.splice(0)) await x.close();
      await appClient.close();
      await other.close();
      proxy.heal(); // the root node answers again: a discovery still going on would now connect the masters
      await sleep(1_500);
      // This spec's own servers and proxy: nothing of this process may still be connected to them.
      expect(ours()).toBe(0);
    } finally {
      await proxy.close();
      await cluster.stop();
    }
  }, 40_000);

  it('a node-redis client with its own keyPrefix shares one lock space with an ioredis client of the same keyPrefix (review finding: two holders)', async () => {
    const ioredis = new Redis(redisUrl(), { keyPrefix: 'app:' });
    try {
      const nodeRedisApp = await app(await connectedWith({ url: redisUrl(), keyPrefix: 'app:' }));
      const ioredisApp = await startLockApp({ redis: { client: ioredis } });
      apps.push(ioredisApp);
      const key = uniqueKey('nr-keyprefix');
      const held = await ioredisApp.locks.acquire(key, { ...opts, ttl: 5_000 });
      expect(await nodeRedisApp.locks.tryAcquire(key, opts)).toBeNull();
      const waiting = nodeRedisApp.locks.acquire(key, { ...opts, ttl: 5_000, wait: 5_000 });
      await untilQueued(nodeRedisApp.locks, key, opts, 1);
      await held.release();
      const next = await waiting;
      expect(await ioredisApp.locks.tryAcquire(key, opts)).toBeNull();
      expect((await nodeRedisApp.locks.list(opts, { prefix: key })).map((l) => l.key)).toEqual([key]);
      expect((await ioredisApp.locks.list(opts, { prefix: key })).map((l) => l.key)).toEqual([key]);
      await next.release();
      const raw = new Redis(redisUrl());
      try {
        expect(await raw.keys(`*${key}*`)).toEqual([]);
      } finally {
        raw.disconnect();
      }
    } finally {
      ioredis.disconnect();
    }
  });

  it('refuses at bootstrap an ioredis Cluster the application disconnect()ed (it stays "close", not "end": review finding)', async () => {
    const servers = await startRedisCluster(3);
    try {
      const cluster = new Cluster(servers.nodes).on('error', () => undefined);
      await until(() => cluster.status === 'ready', 5_000, 'the Cluster client ready');
      cluster.disconnect();
      // 'end' at once, then 'close' for good (ioredis 5's Cluster, 2026-12): the module must refuse both.
      await until(() => cluster.status === 'close', 5_000, 'the disconnected Cluster at "close"');
      const error = await startLockApp({ redis: { client: cluster } }).then(
        async (a) => (await a.close(), undefined),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as Error).message).toMatch(/redis\.client.*closed/);
    } finally {
      await servers.stop();
    }
  });
});
