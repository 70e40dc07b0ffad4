import { Cluster, Redis } from 'ioredis';
import { startLockApp, uniqueKey, untilQueued, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';

/** A one-node Redis Cluster owning all 16384 slots: real cluster protocol (MOVED, hash slots, routing). */
describe('Redis backend on an ioredis Cluster client', () => {
  let server: RedisServer;
  let cluster: Cluster;
  let a: LockApp;
  let b: LockApp;

  beforeAll(async () => {
    server = await RedisServer.start({ cluster: true });
    const admin = new Redis(server.url);
    await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    for (let i = 0; i < 200 && !String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'); i++) {
      await new Promise((r) => setTimeout(r, 25));
    }
    admin.disconnect();
    cluster = new Cluster([{ host: '127.0.0.1', port: server.port }]);
    a = await startLockApp({ redis: { client: cluster } });
    b = await startLockApp({ redis: { client: cluster } });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    cluster?.disconnect();
    await server.stop();
  });

  it('locks, queues and hands over keys whose names contain braces, on one slot', async () => {
    const key = `${uniqueKey('cluster')}:{tenant}:}{`;
    const holder = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
    expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
    const waiter = b.locks.acquire(key, { purpose: 'efficiency', wait: 5_000 });
    await untilQueued(a.locks, key, { purpose: 'efficiency' }, 1); // queued before the release hands over
    await holder.release();
    const next = await waiter;
    expect(next.key).toBe(key);
    await next.release();
    expect(cluster.status).toBe('ready'); // the application's client, still open
  });
});

describe('Redis backend through Sentinel', () => {
  let master: RedisServer;
  let sentinel: RedisServer;

  beforeAll(async () => {
    master = await RedisServer.start();
    sentinel = await RedisServer.startSentinel(master);
  });
  afterAll(async () => {
    await sentinel.stop();
    await master.stop();
  });

  it('accepts Sentinel settings as ioredis options and locks on the master it finds', async () => {
    const options = { sentinels: [{ host: '127.0.0.1', port: sentinel.port }], name: 'mymaster' };
    const a = await startLockApp({ redis: { options } });
    const b = await startLockApp({ redis: { options } });
    const raw = new Redis(master.url);
    try {
      const key = uniqueKey('sentinel');
      const holder = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      expect(await raw.exists(`lock:{${key}}`)).toBe(1); // written to the real master
      const waiter = b.locks.acquire(key, { purpose: 'efficiency', wait: 5_000 });
      await untilQueued(a.locks, key, { purpose: 'efficiency' }, 1); // queued before the release hands over
      await holder.release();
      await (await waiter).release();
      expect(await raw.exists(`lock:{${key}}`)).toBe(0);
    } finally {
      raw.disconnect();
      await a.close();
      await b.close();
    }
  });
});
