import { Cluster } from 'ioredis';
import { BACKEND_PLUGINS } from '../../lib/backends/backend-registry.js';
import type { LockBackend } from '../../lib/backends/lock-backend.interface.js';
import { MemoryBackend } from '../../lib/index.js';
import { verifyLockBackend, type BackendConformanceReport } from '../../lib/testing/index.js';
import { freshPostgres, freshRedisCluster, freshRedlock, freshZooKeeper, type BackendServer } from '../harness/backend-servers.js';
import { etcdHosts, redisUrl } from '../harness/lock-app.js';
import { freePort } from '../harness/servers.mjs';

// Every built-in backend, and each Redis client shape the module accepts, held to the one
// LockBackend contract by the public conformance suite (nest-distributed-lock/testing), against
// real servers. Each instance is built the way forRoot() builds it (through its plugin), as one
// process would; the instances of a case share its server.

const quiet = { warn: () => undefined, log: () => undefined };

/** A backend as forRoot({ [field]: raw }) builds it. */
async function built(field: keyof typeof BACKEND_PLUGINS, raw: unknown): Promise<LockBackend> {
  const plugin = BACKEND_PLUGINS[field] as { resolve(raw: unknown, field: string): unknown; create(settings: unknown, name: string, context: object): Promise<LockBackend> };
  return plugin.create(plugin.resolve(raw, field), field, { driftFactor: 0.01, log: quiet });
}

interface Case {
  /** What the report is about. */
  name: string;
  /** The checks it is not held to: those of capabilities it does not claim (or of a hook it is not given). */
  skips: string[];
  /** The server (started in beforeAll), and the factories over it. */
  start(): Promise<{ server?: BackendServer; create(): Promise<LockBackend>; unreachable?(): Promise<LockBackend>; cleanup?(): void }>;
}

const closedPort = freePort; // reserved for this process and never listened on

const CASES: Case[] = [
  {
    name: 'memory',
    skips: ['unreachable-bounded', 'acquire-all-all-or-nothing'],
    async start() {
      const one = new MemoryBackend();
      return { create: async () => one };
    },
  },
  {
    name: 'redis (ioredis, standalone)',
    skips: ['tokens-increase'],
    async start() {
      const port = await closedPort();
      return {
        create: () => built('redis', { url: redisUrl() }),
        unreachable: () => built('redis', { url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500, commandTimeoutMs: 500 }),
      };
    },
  },
  {
    name: 'redis (ioredis Cluster client, passed in)',
    skips: ['tokens-increase'],
    async start() {
      const server = await freshRedisCluster();
      const nodes = server.nodes!;
      const clients: Cluster[] = [];
      return {
        server,
        create: () => {
          const client = new Cluster(nodes);
          clients.push(client);
          return built('redis', { client });
        },
        unreachable: async () => {
          const client = new Cluster([{ host: '127.0.0.1', port: await closedPort() }]);
          clients.push(client);
          return built('redis', { client, commandTimeoutMs: 500 });
        },
        cleanup: () => clients.forEach((client) => client.disconnect()),
      };
    },
  },
  {
    name: 'redlock (3 masters)',
    skips: ['tokens-increase', 'waiters-served-in-order', 'semaphore-admits-at-most-permits', 'semaphore-permits-agree', 'acquire-all-all-or-nothing'],
    async start() {
      const server = await freshRedlock();
      const ports = await Promise.all([closedPort(), closedPort(), closedPort()]);
      return {
        server,
        create: () => built('redlock', server.options.redlock),
        unreachable: () => built('redlock', { urls: ports.map((port) => `redis://127.0.0.1:${port}`) }),
      };
    },
  },
  {
    name: 'etcd',
    skips: [],
    async start() {
      const port = await closedPort();
      return {
        create: () => built('etcd', { hosts: etcdHosts() }),
        unreachable: () => built('etcd', { hosts: [`127.0.0.1:${port}`], commandTimeoutMs: 500 }),
      };
    },
  },
  {
    name: 'postgres',
    skips: ['acquire-all-all-or-nothing'],
    async start() {
      const server = await freshPostgres();
      const port = await closedPort();
      return {
        server,
        create: () => built('postgres', server.options.postgres),
        unreachable: () => built('postgres', { connectionString: `postgres://127.0.0.1:${port}/none` }),
      };
    },
  },
  {
    name: 'zookeeper',
    skips: ['acquire-all-all-or-nothing'],
    async start() {
      const server = await freshZooKeeper();
      const port = await closedPort();
      return {
        server,
        create: () => built('zookeeper', server.options.zookeeper),
        unreachable: () => built('zookeeper', { connectionString: `127.0.0.1:${port}`, connectTimeoutMs: 500 }),
      };
    },
  },
];

describe.each(CASES)('conformance: $name', ({ start, skips }) => {
  let setup: Awaited<ReturnType<Case['start']>>;
  let report: BackendConformanceReport;
  beforeAll(async () => {
    setup = await start();
    report = await verifyLockBackend({ create: setup.create, unreachable: setup.unreachable });
  }, 240_000);
  afterAll(async () => {
    setup?.cleanup?.();
    await setup?.server?.stop();
  }, 60_000);

  it('passes every check of every capability it claims', () => {
    expect(report.failed).toEqual([]);
    expect(report.passed).toEqual(expect.arrayContaining(['exclusion', 'owner-checked-release', 'stale-owner-cannot-touch-next-holder', 'waiter-granted-after-release', 'nothing-left-behind', 'close']));
  });

  it('skips exactly the checks of capabilities it does not claim', () => {
    expect([...report.skipped].sort()).toEqual([...skips].sort());
  });
});
