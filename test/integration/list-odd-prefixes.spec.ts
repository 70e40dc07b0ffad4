import type { Lease } from '../../lib/index.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 6: list() with odd prefixes. The README: `prefix` is
// the start of the key as you name it; `%`, `_`, `*` and `\` in it are literal. For keys that
// differ only in such characters, list(prefix) must give exactly the held keys starting with it.

// Every backend and topology: a prefix is matched by each backend's own listing (SCAN patterns,
// SQL LIKE, etcd ranges, ZooKeeper children), and each could read these characters as its syntax.
const CASES = backendCases();

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
