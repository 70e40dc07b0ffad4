import { Cluster, Redis } from 'ioredis';
import { Cluster as ValkeyCluster, Redis as Valkey } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { startRedisCluster } from './redis-cluster.js';
import { MemoryBackend, type DistributedLockModuleOptions, type LockPurpose } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep } from './lock-app.js';
import mysql from 'mysql2/promise';
import { MariaDbServer } from './mariadb.mjs';
import { PostgresServer } from './postgres.mjs';
import { RedisServer } from './servers.mjs';
import { ZooKeeperServer } from './zookeeper.mjs';

/** A backend's server for a spec: the module options that reach it, and how to stop what the spec started. */
export interface BackendServer {
  options: DistributedLockModuleOptions;
  /** Where a client of one's own connects (set where a spec may need a second client). */
  nodes?: Array<{ host: string; port: number }>;
  /**
   * The options of one more process on this server, with clients of its own where the options carry
   * a client (stop() closes them). Absent: `options` serve any number of processes.
   */
  another?(): DistributedLockModuleOptions | Promise<DistributedLockModuleOptions>;
  /**
   * Options that reach no server of this kind (a port nobody listens on), with short timeouts: what
   * the conformance suite's `unreachable-bounded` check builds; `closedPort` gives a port nobody listens on
   * (a new one per call). Absent: the backend has no server
   * (the in-process memory backend).
   */
  unreachable?(closedPort: () => Promise<number>): Promise<DistributedLockModuleOptions>;
  stop(): Promise<void>;
}

const nothing = async (): Promise<void> => undefined;

/** One MemoryBackend instance, named 'shared', that several applications of a spec share. */
export const sharedMemory = async (): Promise<BackendServer> => ({ options: { backends: { shared: new MemoryBackend('shared') }, purposes: { correctness: 'shared' } }, stop: nothing });

/** The redis-server `npm test` started for the run. */
export const suiteRedis = async (): Promise<BackendServer> => ({
  options: { redis: { url: redisUrl() } },
  unreachable: async (closedPort) => ({ redis: { url: `redis://127.0.0.1:${await closedPort()}`, connectTimeoutMs: 500, commandTimeoutMs: 500 } }),
  stop: nothing,
});

/** The etcd `npm test` started for the run. */
export const suiteEtcd = async (): Promise<BackendServer> => ({
  options: { etcd: { hosts: etcdHosts() } },
  unreachable: async (closedPort) => ({ etcd: { hosts: [`127.0.0.1:${await closedPort()}`], commandTimeoutMs: 500 } }),
  stop: nothing,
});

/** A PostgreSQL of the spec's own. */
export async function freshPostgres(): Promise<BackendServer> {
  const pg = await PostgresServer.start();
  return {
    options: { postgres: { connectionString: pg.url } },
    unreachable: async (closedPort) => ({ postgres: { connectionString: `postgres://127.0.0.1:${await closedPort()}/none` } }),
    stop: () => pg.stop(),
  };
}

/** A MariaDB of the spec's own, with a database `ndl` for the backend's tables. */
export async function freshMySql(): Promise<BackendServer> {
  const server = await MariaDbServer.start();
  const admin = await mysql.createConnection({ uri: server.url });
  await admin.query('CREATE DATABASE ndl');
  await admin.end();
  return {
    options: { mysql: { uri: server.url.replace(/\/[^/]*$/, '/ndl') } },
    unreachable: async (closedPort) => ({ mysql: { uri: `mysql://root@127.0.0.1:${await closedPort()}/ndl`, connectTimeoutMs: 500 } }),
    stop: () => server.stop(),
  };
}

/** A ZooKeeper of the spec's own (4 s sessions). */
export async function freshZooKeeper(): Promise<BackendServer> {
  const zk = await ZooKeeperServer.start();
  return {
    options: { zookeeper: { connectionString: zk.connectionString, sessionTimeoutMs: 4_000 } },
    unreachable: async (closedPort) => ({ zookeeper: { connectionString: `127.0.0.1:${await closedPort()}`, connectTimeoutMs: 500 } }),
    stop: () => zk.stop(),
  };
}

/** Three independent Redis masters for Redlock. */
export async function freshRedlock(): Promise<BackendServer> {
  const masters = await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()]);
  return {
    options: { redlock: { urls: masters.map((m) => m.url) } },
    // Three masters, none answering (each its own port: the module refuses one server named twice).
    unreachable: async (closedPort) => ({ redlock: { urls: (await Promise.all([closedPort(), closedPort(), closedPort()])).map((port) => `redis://127.0.0.1:${port}`) } }),
    stop: async () => void (await Promise.all(masters.map((m) => m.stop()))),
  };
}

/** A one-node Redis Cluster owning every slot, through a Cluster client: a script spanning slots fails there (CROSSSLOT). */
export async function freshRedisCluster(): Promise<BackendServer> {
  const server = await RedisServer.start({ cluster: true });
  const admin = new Redis(server.url);
  await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  for (let i = 0; i < 200 && !String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'); i++) await sleep(25);
  admin.disconnect();
  const nodes = [{ host: '127.0.0.1', port: server.port }];
  // The application's clients (passed in: the module never closes them), one per process.
  const clients = [new Cluster(nodes)];
  const own = (client: Cluster): Cluster => (clients.push(client), client);
  return {
    options: { redis: { client: clients[0] } },
    nodes,
    another: () => ({ redis: { client: own(new Cluster(nodes)) } }),
    // The application listens to its client's errors (ioredis prints each one it finds no listener for).
    unreachable: async (closedPort) => ({ redis: { client: own(new Cluster([{ host: '127.0.0.1', port: await closedPort() }]).on('error', () => undefined) as Cluster), commandTimeoutMs: 500 } }),
    stop: async () => {
      for (const client of clients) client.disconnect();
      await server.stop();
    },
  };
}

/** The `redis` package's clients closed at stop(), connecting first (the module takes node-redis clients connected). */
function nodeRedisClients(): { open(make: () => { connect(): Promise<unknown>; on(e: string, l: () => void): unknown }): Promise<never>; stop(): Promise<void> } {
  const clients: Array<{ isOpen: boolean; destroy(): void }> = [];
  return {
    open: async (make) => {
      const client = make();
      client.on('error', () => undefined);
      clients.push(client as never);
      return (await client.connect()) as never;
    },
    stop: async () => {
      for (const c of clients) c.destroy();
    },
  };
}

/** The run's redis-server through the application's node-redis clients (one per process). */
export async function suiteRedisNodeRedis(): Promise<BackendServer> {
  const clients = nodeRedisClients();
  const open = (): Promise<never> => clients.open(() => createClient({ url: redisUrl() }));
  return {
    options: { redis: { client: await open() } },
    another: async () => ({ redis: { client: await open() } }),
    // A client connected to a server of its own that is then stopped: node-redis refuses to be given a client it never connected.
    unreachable: async () => {
      const gone = await RedisServer.start();
      const client = await clients.open(() => createClient({ url: gone.url, socket: { reconnectStrategy: 50 } }));
      await gone.stop();
      return { redis: { client, connectTimeoutMs: 500, commandTimeoutMs: 500 } };
    },
    stop: () => clients.stop(),
  };
}

/** The run's redis-server through the application's iovalkey clients (one per process). */
export async function suiteRedisIovalkey(): Promise<BackendServer> {
  const clients: Valkey[] = [];
  const own = (client: Valkey): Valkey => (clients.push(client), client);
  return {
    options: { redis: { client: own(new Valkey(redisUrl())) } },
    another: () => ({ redis: { client: own(new Valkey(redisUrl())) } }),
    unreachable: async (closedPort) => ({ redis: { client: own(new Valkey({ port: await closedPort(), host: '127.0.0.1' })), connectTimeoutMs: 500, commandTimeoutMs: 500 } }),
    stop: async () => {
      for (const client of clients) client.disconnect();
    },
  };
}

/** A three-master Redis Cluster of the spec's own, through the application's iovalkey Cluster clients. */
export async function freshRedisClusterIovalkey(): Promise<BackendServer> {
  const cluster = await startRedisCluster(3);
  const clients: ValkeyCluster[] = [];
  const own = (client: ValkeyCluster): ValkeyCluster => (clients.push(client.on('error', () => undefined) as ValkeyCluster), client);
  return {
    options: { redis: { client: own(new ValkeyCluster(cluster.nodes)) } },
    nodes: cluster.nodes,
    another: () => ({ redis: { client: own(new ValkeyCluster(cluster.nodes)) } }),
    unreachable: async (closedPort) => ({ redis: { client: own(new ValkeyCluster([{ host: '127.0.0.1', port: await closedPort() }])), commandTimeoutMs: 500 } }),
    stop: async () => {
      for (const client of clients) client.disconnect();
      await cluster.stop();
    },
  };
}

/** A three-master Redis Cluster of the spec's own, through the application's node-redis Cluster clients. */
export async function freshRedisClusterNodeRedis(): Promise<BackendServer> {
  const cluster = await startRedisCluster(3);
  const clients = nodeRedisClients();
  const rootNodes = cluster.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}` }));
  const open = (): Promise<never> => clients.open(() => createCluster({ rootNodes }));
  return {
    options: { redis: { client: await open() } },
    nodes: cluster.nodes,
    another: async () => ({ redis: { client: await open() } }),
    // A one-master Cluster of its own, connected to and then stopped (node-redis is given connected clients only).
    unreachable: async () => {
      const gone = await startRedisCluster(1);
      const client = await clients.open(() => createCluster({ rootNodes: gone.nodes.map((n) => ({ url: `redis://${n.host}:${n.port}`, socket: { reconnectStrategy: 50 } })) }));
      await gone.stop();
      return { redis: { client, connectTimeoutMs: 500, commandTimeoutMs: 500 } };
    },
    stop: async () => {
      await clients.stop();
      await cluster.stop();
    },
  };
}

/**
 * One backend a spec runs against, as the suite knows it: its name in the module, what it promises
 * (the capabilities a spec's checks depend on) and how to start its server. A spec takes its cases
 * from `backendCases()`, filtered by what it needs: a new backend is one entry in BACKENDS (and its
 * server starter above), and every spec whose needs it meets runs against it.
 */
export interface BackendCase {
  /** Distinct per case, for titles: 'memory', 'redis', 'redis-cluster', 'redlock', 'etcd', 'postgres', 'mysql', 'zookeeper'. */
  name: string;
  /**
   * The Redis client the application passes, where it is not ioredis: these cases run in the
   * conformance suite, and in every spec that takes its cases from `backendCases()` when
   * TEST_REDIS_CLIENTS=all (a run of its own: they add minutes to `npm test`).
   */
  client?: 'node-redis' | 'iovalkey';
  /** Its name in the module: what `{ backend }` selects. */
  backend: string;
  /** The purpose a spec asks for on it (correctness where it may serve it). */
  purpose: LockPurpose;
  /** It issues fencing tokens that grow across holders. */
  fencing: boolean;
  /** Callers queue on the server (Redlock only retries). */
  queues: boolean;
  /** Queued waiters are served in arrival order. */
  fifo: boolean;
  /** A release reserves the key for the head waiter and tells it by a message (Redis, PostgreSQL: their `waiters` keep the hand-off). */
  handsOff: boolean;
  /** Semaphore keys (`permits` ≥ 2). */
  semaphores: boolean;
  /** Read-write locks (`mode`): the backend claims `capabilities.readWrite`. Absent: false. */
  readWrite?: boolean;
  /** A holder whose key is force-released is told: by a message ('message') or only at its next extend ('extend'). */
  lossNotice: 'message' | 'extend';
  /** A Redis Cluster: a script's keys must share a slot. */
  cluster: boolean;
  /** `acquireAll` takes every key in one step on the server (all or nothing), not key by key. */
  atomicMultiKey: boolean;
  /** The server ends a hold at its ttl by itself (ZooKeeper's znodes have no ttl: its sessions end them). */
  expires: boolean;
  /** Each `server()` call starts a server (or store) of its own: a listing shows only what the spec holds (Redis and etcd are the run's shared servers). */
  ownServer: boolean;
  /** Lives in this process (the memory backend, one object every app of the spec shares): a worker process cannot reach it, and a fault injected on one app's backend object reaches them all. */
  inProcess: boolean;
  server: () => Promise<BackendServer>;
}

/** Every backend and topology the suite runs. */
export const BACKENDS: readonly BackendCase[] = [
  { name: 'memory', backend: 'shared', purpose: 'correctness', fencing: true, queues: true, fifo: true, handsOff: false, semaphores: true, readWrite: true, lossNotice: 'message', cluster: false, atomicMultiKey: false, expires: true, ownServer: true, inProcess: true, server: sharedMemory },
  { name: 'redis', backend: 'redis', purpose: 'efficiency', fencing: false, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: true, expires: true, ownServer: false, inProcess: false, server: suiteRedis },
  { name: 'redis-cluster', backend: 'redis', purpose: 'efficiency', fencing: false, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: true, atomicMultiKey: true, expires: true, ownServer: true, inProcess: false, server: freshRedisCluster },
  { name: 'redis-node-redis', client: 'node-redis', backend: 'redis', purpose: 'efficiency', fencing: false, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: true, expires: true, ownServer: false, inProcess: false, server: suiteRedisNodeRedis },
  { name: 'redis-cluster-node-redis', client: 'node-redis', backend: 'redis', purpose: 'efficiency', fencing: false, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: true, atomicMultiKey: true, expires: true, ownServer: true, inProcess: false, server: freshRedisClusterNodeRedis },
  { name: 'redis-cluster-iovalkey', client: 'iovalkey', backend: 'redis', purpose: 'efficiency', fencing: false, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: true, atomicMultiKey: true, expires: true, ownServer: true, inProcess: false, server: freshRedisClusterIovalkey },
  { name: 'redis-iovalkey', client: 'iovalkey', backend: 'redis', purpose: 'efficiency', fencing: false, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: true, expires: true, ownServer: false, inProcess: false, server: suiteRedisIovalkey },
  { name: 'redlock', backend: 'redlock', purpose: 'efficiency', fencing: false, queues: false, fifo: false, handsOff: false, semaphores: false, lossNotice: 'extend', cluster: false, atomicMultiKey: false, expires: true, ownServer: true, inProcess: false, server: freshRedlock },
  { name: 'etcd', backend: 'etcd', purpose: 'correctness', fencing: true, queues: true, fifo: true, handsOff: false, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: true, expires: true, ownServer: false, inProcess: false, server: suiteEtcd },
  { name: 'postgres', backend: 'postgres', purpose: 'correctness', fencing: true, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: false, expires: true, ownServer: true, inProcess: false, server: freshPostgres },
  { name: 'mysql', backend: 'mysql', purpose: 'correctness', fencing: true, queues: true, fifo: true, handsOff: true, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: false, expires: true, ownServer: true, inProcess: false, server: freshMySql },
  { name: 'zookeeper', backend: 'zookeeper', purpose: 'correctness', fencing: true, queues: true, fifo: true, handsOff: false, semaphores: true, lossNotice: 'message', cluster: false, atomicMultiKey: false, expires: false, ownServer: true, inProcess: false, server: freshZooKeeper },
];

/**
 * The cases a spec runs: those that meet `needs` (every case when omitted), in BACKENDS' order;
 * the other Redis clients' cases only with `clients` (the conformance suite) or TEST_REDIS_CLIENTS=all.
 */
export function backendCases(needs: (c: BackendCase) => boolean = () => true, { clients = process.env.TEST_REDIS_CLIENTS === 'all' } = {}): BackendCase[] {
  return BACKENDS.filter((c) => (clients || c.client === undefined) && needs(c));
}

/** Every backend that queues (for `describe.each`): one topology per backend. */
export const EVERY_BACKEND: readonly BackendCase[] = backendCases((c) => c.queues && !c.cluster);
