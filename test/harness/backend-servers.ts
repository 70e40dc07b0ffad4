import { Cluster, Redis } from 'ioredis';
import { MemoryBackend, type DistributedLockModuleOptions, type LockPurpose } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep } from './lock-app.js';
import { PostgresServer } from './postgres.mjs';
import { RedisServer } from './servers.mjs';
import { ZooKeeperServer } from './zookeeper.mjs';

/** A backend's server for a spec: the module options that reach it, and how to stop what the spec started. */
export interface BackendServer {
  options: DistributedLockModuleOptions;
  /** Where a client of one's own connects (set where a spec may need a second client). */
  nodes?: Array<{ host: string; port: number }>;
  stop(): Promise<void>;
}

const nothing = async (): Promise<void> => undefined;

/** One MemoryBackend instance, named 'shared', that several applications of a spec share. */
export const sharedMemory = async (): Promise<BackendServer> => ({ options: { backends: { shared: new MemoryBackend('shared') } }, stop: nothing });

/** The redis-server `npm test` started for the run. */
export const suiteRedis = async (): Promise<BackendServer> => ({ options: { redis: { url: redisUrl() } }, stop: nothing });

/** The etcd `npm test` started for the run. */
export const suiteEtcd = async (): Promise<BackendServer> => ({ options: { etcd: { hosts: etcdHosts() } }, stop: nothing });

/** A PostgreSQL of the spec's own. */
export async function freshPostgres(): Promise<BackendServer> {
  const pg = await PostgresServer.start();
  return { options: { postgres: { connectionString: pg.url } }, stop: () => pg.stop() };
}

/** A ZooKeeper of the spec's own (4 s sessions). */
export async function freshZooKeeper(): Promise<BackendServer> {
  const zk = await ZooKeeperServer.start();
  return { options: { zookeeper: { connectionString: zk.connectionString, sessionTimeoutMs: 4_000 } }, stop: () => zk.stop() };
}

/** Three independent Redis masters for Redlock. */
export async function freshRedlock(): Promise<BackendServer> {
  const masters = await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()]);
  return { options: { redlock: { urls: masters.map((m) => m.url) } }, stop: async () => void (await Promise.all(masters.map((m) => m.stop()))) };
}

/** A one-node Redis Cluster owning every slot, through a Cluster client: a script spanning slots fails there (CROSSSLOT). */
export async function freshRedisCluster(): Promise<BackendServer> {
  const server = await RedisServer.start({ cluster: true });
  const admin = new Redis(server.url);
  await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  for (let i = 0; i < 200 && !String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'); i++) await sleep(25);
  admin.disconnect();
  const cluster = new Cluster([{ host: '127.0.0.1', port: server.port }]);
  return {
    options: { redis: { client: cluster } },
    nodes: [{ host: '127.0.0.1', port: server.port }],
    stop: async () => {
      cluster.disconnect();
      await server.stop();
    },
  };
}

/** One backend a spec runs against: its name, the purpose it serves, and how to start its server. */
export interface BackendCase {
  backend: string;
  purpose: LockPurpose;
  server: () => Promise<BackendServer>;
}

/** Every backend that queues, with the purpose it serves (for `describe.each`). */
export const EVERY_BACKEND: readonly BackendCase[] = [
  { backend: 'shared', purpose: 'correctness', server: sharedMemory },
  { backend: 'redis', purpose: 'efficiency', server: suiteRedis },
  { backend: 'etcd', purpose: 'correctness', server: suiteEtcd },
  { backend: 'postgres', purpose: 'correctness', server: freshPostgres },
  { backend: 'zookeeper', purpose: 'correctness', server: freshZooKeeper },
];
