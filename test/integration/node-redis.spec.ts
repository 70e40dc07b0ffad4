import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { createClient, createCluster, RESP_TYPES } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import {
  DistributedLock,
  DistributedLockModule,
  DistributedLockService,
  InvalidLockOptionsError,
  RedisFence,
  StaleFencingTokenError,
  type DistributedLockModuleOptions,
} from '../../lib/index.js';
import { redisUrl, sleep, startLockApp, uniqueKey, untilQueued, type LockApp } from '../harness/lock-app.js';
import { startRedisCluster, type RedisClusterServers } from '../harness/redis-cluster.js';
import { RedisServer } from '../harness/servers.mjs';

// forRoot({ redis: { client } }) with the application's node-redis client (the `redis` package,
// v6 and v5), as a Nest application uses it: the service and @DistributedLock, on one server (RESP3
// and RESP2) and on a three-master Cluster. Each application is one process with a client of its own.

/** What a spec needs of a node-redis client, whichever version made it. */
interface AppClient {
  readonly isOpen: boolean;
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  sendCommand(...args: any[]): Promise<unknown>;
}

interface Topology {
  name: string;
  /** A connected client of the application's. */
  open(): Promise<AppClient>;
  /** PING through the application's client (a Cluster routes it to a node). */
  ping(client: AppClient): Promise<unknown>;
}

let cluster: RedisClusterServers;
const clusterNodes = (): Array<{ url: string }> => cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` }));

const TOPOLOGIES: Topology[] = [
  { name: 'node-redis 6, RESP3', open: () => createClient({ url: redisUrl(), RESP: 3 }).on('error', () => undefined).connect() as Promise<AppClient>, ping: (c) => c.sendCommand(['PING']) },
  { name: 'node-redis 6, RESP2', open: () => createClient({ url: redisUrl(), RESP: 2 }).on('error', () => undefined).connect() as Promise<AppClient>, ping: (c) => c.sendCommand(['PING']) },
  { name: 'node-redis 5', open: () => createClient5({ url: redisUrl() }).on('error', () => undefined).connect() as Promise<AppClient>, ping: (c) => c.sendCommand(['PING']) },
  {
    // An application whose client maps every string reply to a Buffer: the module reads its own replies as strings.
    name: 'node-redis 6 with Buffer replies',
    open: async () => (await createClient({ url: redisUrl() }).on('error', () => undefined).connect()).withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer, [RESP_TYPES.SIMPLE_STRING]: Buffer }) as unknown as AppClient,
    ping: async (c) => String(await c.sendCommand(['PING'])),
  },
  {
    name: 'node-redis 6 Cluster (3 masters)',
    open: () => createCluster({ rootNodes: clusterNodes() }).on('error', () => undefined).connect() as Promise<AppClient>,
    ping: (c) => c.sendCommand(undefined, true, ['PING']),
  },
  {
    name: 'node-redis 5 Cluster (3 masters)',
    open: () => createCluster5({ rootNodes: clusterNodes() }).on('error', () => undefined).connect() as Promise<AppClient>,
    ping: (c) => c.sendCommand(undefined, true, ['PING']),
  },
];

beforeAll(async () => {
  cluster = await startRedisCluster(3);
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

describe.each(TOPOLOGIES)('Redis backend on the application’s $name client', (topology) => {
  const clients: AppClient[] = [];
  const apps: LockApp[] = [];
  const open = async (): Promise<AppClient> => {
    const client = await topology.open();
    clients.push(client);
    return client;
  };
  const app = async (client: AppClient, extra: Partial<NonNullable<DistributedLockModuleOptions['redis']>> = {}): Promise<LockApp> => {
    const started = await startLockApp({ redis: { client: client as never, ...extra } });
    apps.push(started);
    return started;
  };
  afterEach(async () => {
    for (const a of apps.splice(0)) await a.close();
    for (const c of clients.splice(0)) if (c.isOpen) await c.close();
  });

  it('excludes across processes and hands a released key to the waiter by message, not by polling', async () => {
    const [a, b] = [await app(await open()), await app(await open())];
    // Keys of many slots: on a Cluster they live on different masters.
    for (const name of ['alpha', 'beta', 'gamma']) {
      const key = uniqueKey(`node-redis-${name}`);
      const held = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      const waiting = b.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000, wait: 5_000 });
      await untilQueued(b.locks, key, { purpose: 'efficiency' }, 1);
      const released = performance.now();
      await held.release();
      const next = await waiting;
      // The waiter re-checks by itself only every 500 ms (waiterHeartbeatMs): sooner is the hand-off's message.
      expect(performance.now() - released).toBeLessThan(400);
      expect(next.signal.aborted).toBe(false);
      await next.release();
    }
  });

  it('signals the holder when another process force-releases its key', async () => {
    const [a, b] = [await app(await open()), await app(await open())];
    const key = uniqueKey('node-redis-forced');
    const lease = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 30_000 });
    const lost = new Promise<unknown>((resolve) => lease.signal.addEventListener('abort', () => resolve(lease.signal.reason), { once: true }));
    expect(await b.locks.forceRelease(key, { purpose: 'efficiency' })).toBe(true);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('not signalled'), 2_000)));
    await expect(Promise.race([lost, late]).finally(() => clearTimeout(timer))).resolves.not.toBe('not signalled');
    expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).not.toBeNull();
  });

  it('runs a @DistributedLock method on one process at a time, lists its key, and leaves the client open after app.close()', async () => {
    const key = uniqueKey('node-redis-decorated');
    let inside = 0;
    let most = 0;
    let runs = 0;
    @Injectable()
    class Job {
      constructor(readonly locks: DistributedLockService) {}
      @DistributedLock({ purpose: 'efficiency', key, wait: 10_000 })
      async run(): Promise<string[]> {
        inside += 1;
        most = Math.max(most, inside);
        runs += 1;
        await sleep(20);
        const listed = await this.locks.list({ purpose: 'efficiency' }, { prefix: key });
        inside -= 1;
        return listed.map((l) => l.key);
      }
    }
    const client = await open();
    const boot = async (): Promise<{ close(): Promise<void>; job: Job }> => {
      @Module({ imports: [DistributedLockModule.forRoot({ redis: { client: client as never } })], providers: [Job] })
      class AppModule {}
      const ctx = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
      return { close: () => ctx.close(), job: ctx.get(Job) };
    };
    const [x, y] = [await boot(), await boot()];
    const listed = await Promise.all([...Array.from({ length: 4 }, () => x.job.run()), ...Array.from({ length: 4 }, () => y.job.run())]);
    expect(runs).toBe(8);
    expect(most).toBe(1);
    for (const keys of listed) expect(keys).toEqual([key]);
    await x.close();
    await y.close();
    expect(client.isOpen).toBe(true);
    expect(await topology.ping(client)).toBe('PONG');
  });

  it('fences writes through RedisFence on the same client', async () => {
    const fence = new RedisFence((await open()) as never);
    const key = uniqueKey('node-redis-fence');
    await fence.write(key, 'first', 5n);
    await expect(fence.write(key, 'stale', 4n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await fence.read(key, 6n)).toBe('first');
    await expect(fence.write(key, 'late', 5n)).rejects.toBeInstanceOf(StaleFencingTokenError);
  });
});

describe('node-redis clients the module refuses at bootstrap', () => {
  const refused = async (client: unknown): Promise<InvalidLockOptionsError> => {
    const error = await startLockApp({ redis: { client: client as never } }).then(
      async (a) => {
        await a.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).message).toContain('redis.client');
    return error as InvalidLockOptionsError;
  };

  it('a client not connected yet, naming connect()', async () => {
    expect((await refused(createClient({ url: redisUrl() }))).message).toMatch(/not connected: await client\.connect\(\)/);
    expect((await refused(createCluster({ rootNodes: clusterNodes() }))).message).toMatch(/not open \(not connected yet, or closed\).*await client\.connect\(\)/);
  });

  it('a client already closed', async () => {
    const client = await createClient({ url: redisUrl() }).connect();
    await client.close();
    expect((await refused(client)).message).toMatch(/closed/);
  });

  it('anything that is neither kind, naming both', async () => {
    expect((await refused({ sendCommand: () => undefined })).message).toMatch(/ioredis.*node-redis/);
    expect((await refused('redis://127.0.0.1:6379')).message).toMatch(/ioredis.*node-redis/);
  });

  it('the same for each of Redlock’s clients', async () => {
    const servers = await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()]);
    const clients = await Promise.all(servers.map((s) => createClient({ url: s.url }).on('error', () => undefined).connect()));
    try {
      const late = createClient({ url: servers[2]!.url });
      const error = await startLockApp({ redlock: { clients: [clients[0], clients[1], late] as never } }).then(
        async (a) => (await a.close(), undefined),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as Error).message).toContain('redlock.clients[2]');
      // And with all three connected, Redlock runs on them and leaves them open.
      const a = await startLockApp({ redlock: { clients: clients as never } });
      const b = await startLockApp({ redlock: { clients: clients as never } });
      const key = uniqueKey('node-redis-redlock');
      const lease = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000 });
      expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      await lease.release();
      expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).not.toBeNull();
      await a.close();
      await b.close();
      for (const c of clients) expect(await c.ping()).toBe('PONG');
    } finally {
      for (const c of clients) if (c.isOpen) await c.close();
      await Promise.all(servers.map((s) => s.stop()));
    }
  });
});
