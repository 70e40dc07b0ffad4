import { LockBusyError, type Lease } from '../../lib/index.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 3 (first on Redis, a Redis Cluster with hash-tag slot
// groups, PostgreSQL and ZooKeeper; now on every backend that queues): keys in two hash-tag groups plus untagged keys, random
// subsets of 2-4 keys and single keys, from three apps, with a ttl short enough (900 ms) that the
// keep-alive of earlier keys runs while a caller waits. Checked at every grant: no other trusted
// lease (signal not aborted, remainingMs() > 0) covers any of its keys. Everybody finishes.

// Every backend that queues, every topology.
const CASES = backendCases((c) => c.queues);

const CALLERS = 9;
const ROUNDS = 30;

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

describe.each(CASES)('multi-key stress on $name', ({ name, backend, purpose, server }) => {
  let running: BackendServer;
  let apps: LockApp[];
  beforeAll(async () => {
    running = await server();
    apps = await Promise.all([0, 1, 2].map(() => startLockApp(running.options)));
  }, 90_000);
  afterAll(async () => {
    for (const app of apps ?? []) await app.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  it(`never two trusted holders of a key; every caller finishes (${CALLERS} callers × ${ROUNDS} rounds)`, async () => {
    const u = uniqueKey(`adv2mks-${name}`);
    const pool = [`{g1}${u}:a`, `{g1}${u}:b`, `{g2}${u}:c`, `{g2}${u}:d`, `${u}:e`, `${u}:f`];
    const live = new Set<Lease>();
    const findings: string[] = [];
    let grants = 0;
    await Promise.all(
      Array.from({ length: CALLERS }, async (_, caller) => {
        const random = rng(caller * 7919 + 17);
        const app = apps[caller % apps.length];
        for (let round = 0; round < ROUNDS; round++) {
          const size = random() < 0.25 ? 1 : 2 + Math.floor(random() * 3);
          const keys = [...pool].sort(() => random() - 0.5).slice(0, size);
          let lease: Lease;
          try {
            lease = await app.locks.acquire(size === 1 ? keys[0] : keys, { purpose, backend, ttl: 900, wait: 30_000 });
          } catch (error) {
            findings.push(`caller ${caller} round ${round}: ${(error as Error).name}: ${(error as Error).message}${error instanceof LockBusyError ? ' (a 30 s wait ran out: deadlock?)' : ''}`);
            continue;
          }
          grants += 1;
          for (const other of live) {
            if (other.signal.aborted || other.remainingMs() <= 0) continue;
            const both = lease.keys.filter((k) => other.keys.includes(k));
            if (both.length > 0) findings.push(`caller ${caller} round ${round}: granted [${lease.keys.join(', ')}] while a trusted lease holds [${other.keys.join(', ')}] (shared: ${both.join(', ')})`);
          }
          live.add(lease);
          // Mostly short; one round in ten holds 350-650 ms, so waiters run their keep-alive (ttl/3).
          await sleep(random() < 0.1 ? 350 + Math.floor(random() * 300) : 5 + Math.floor(random() * 25));
          live.delete(lease);
          await lease.release().catch(() => undefined);
        }
      }),
    );
    expect(grants).toBeGreaterThan(CALLERS * ROUNDS * 0.8);
    expect(findings).toEqual([]);
  }, 150_000);
});
