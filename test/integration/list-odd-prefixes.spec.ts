import type { Lease, LockPurpose } from '../../lib/index.js';
import { freshPostgres, freshRedisCluster, freshRedlock, freshZooKeeper, sharedMemory, suiteEtcd, suiteRedis, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 6: list() with odd prefixes. The README: `prefix` is
// the start of the key as you name it; `%`, `_`, `*` and `\` in it are literal. For keys that
// differ only in such characters, list(prefix) must give exactly the held keys starting with it.

interface Case {
  name: string;
  backend: string;
  purpose: LockPurpose;
  server: () => Promise<BackendServer>;
}

const CASES: Case[] = [
  { name: 'memory', backend: 'shared', purpose: 'correctness', server: sharedMemory },
  { name: 'redis', backend: 'redis', purpose: 'efficiency', server: suiteRedis },
  { name: 'redis-cluster', backend: 'redis', purpose: 'efficiency', server: freshRedisCluster },
  { name: 'redlock', backend: 'redlock', purpose: 'efficiency', server: freshRedlock },
  { name: 'etcd', backend: 'etcd', purpose: 'correctness', server: suiteEtcd },
  { name: 'postgres', backend: 'postgres', purpose: 'correctness', server: freshPostgres },
  { name: 'zookeeper', backend: 'zookeeper', purpose: 'correctness', server: freshZooKeeper },
];

const MIDDLES = ['%', '_', 'A', '*', '?', '[a]', '[', '\\', '.', '%2E', '}', '{', '{}', '/', '%25', '^', '$', '|', '(', ' '];

describe.each(CASES)('list() with odd prefixes on $name', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let app: LockApp;
  beforeAll(async () => {
    running = await server();
    app = await startLockApp(running.options);
  }, 90_000);
  afterAll(async () => {
    await app?.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  it('gives exactly the held keys that start with the prefix', async () => {
    const u = uniqueKey('adv2-list');
    const keys = MIDDLES.map((m) => `${u}x${m}y`);
    const held: Lease[] = [];
    for (const k of keys) held.push(await app.locks.acquire(k, { purpose, backend, ttl: 30_000 }));
    const findings: string[] = [];
    try {
      for (const m of MIDDLES) {
        const prefix = `${u}x${m}`;
        const got = (await app.locks.list({ backend }, { prefix, limit: 1000 })).map((i) => i.key).sort();
        const want = keys.filter((k) => k.startsWith(prefix)).sort();
        if (JSON.stringify(got) !== JSON.stringify(want)) findings.push(`prefix …x${m}: got [${got.map((k) => k.slice(u.length)).join(' ')}], want [${want.map((k) => k.slice(u.length)).join(' ')}]`);
      }
    } finally {
      for (const l of held) await l.release();
    }
    expect(findings).toEqual([]);
  }, 60_000);
});
