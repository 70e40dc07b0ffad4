import type { DistributedLockModuleOptions, Lease, LockPurpose } from '../../lib/index.js';
import { PostgresServer } from '../harness/postgres.mjs';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { Adv2Worker } from '../workers/scripted-worker-client.js';

// Adversarial review round 3 (adv2), attack 1: a multi-key acquirer W in its own process takes
// keys[0], queues for the last key (held by B), and is SIGSTOPped past what keeps keys[0] alive
// (its etcd session — with commandTimeoutMs above the session ttl —, its ZooKeeper session, its
// Redis/PostgreSQL ttl). Meanwhile C takes keys[0] and B gives the last key back (handed to W's
// queue place while W is frozen). Then SIGCONT.
// Must never happen: W granted a lease it trusts while C holds keys[0] (two holders), or W's
// token not larger than C's once W does get it after C (tokens only grow per key).

interface Case {
  backend: string;
  purpose: LockPurpose;
  /** W's module options. */
  worker: () => DistributedLockModuleOptions;
  /** The parent's. */
  parent: () => DistributedLockModuleOptions;
  ttl: number;
  pauseMs: number;
  /** How many keys W asks for (default 3; etcd above 64 goes key by key). */
  count?: number;
}

let pg: PostgresServer | undefined;
let zk: ZooKeeperServer | undefined;

const CASES: Case[] = [
  {
    backend: 'etcd',
    purpose: 'correctness',
    worker: () => ({ etcd: { hosts: etcdHosts(), sessionTtlSeconds: 2, commandTimeoutMs: 5_000 } }),
    parent: () => ({ etcd: { hosts: etcdHosts() } }),
    ttl: 20_000,
    pauseMs: 5_000,
    count: 100,
  },
  {
    backend: 'etcd',
    purpose: 'correctness',
    worker: () => ({ etcd: { hosts: etcdHosts(), sessionTtlSeconds: 2, commandTimeoutMs: 5_000 } }),
    parent: () => ({ etcd: { hosts: etcdHosts() } }),
    ttl: 20_000,
    pauseMs: 5_000,
  },
  {
    backend: 'zookeeper',
    purpose: 'correctness',
    worker: () => ({ zookeeper: { connectionString: zk!.connectionString, sessionTimeoutMs: 4_000, commandTimeoutMs: 6_000 } }),
    parent: () => ({ zookeeper: { connectionString: zk!.connectionString, sessionTimeoutMs: 4_000 } }),
    ttl: 20_000,
    pauseMs: 9_000,
  },
  {
    backend: 'redis',
    purpose: 'efficiency',
    worker: () => ({ redis: { url: redisUrl() } }),
    parent: () => ({ redis: { url: redisUrl() } }),
    ttl: 1_500,
    pauseMs: 3_000,
  },
  {
    backend: 'postgres',
    purpose: 'correctness',
    worker: () => ({ postgres: { connectionString: pg!.url } }),
    parent: () => ({ postgres: { connectionString: pg!.url } }),
    ttl: 1_500,
    pauseMs: 3_000,
  },
];

const RUNS = 2;

describe.each(CASES)('a multi-key acquirer SIGSTOPped mid-attempt past what keeps its first key ($backend, $count keys)', (c) => {
  let w: Adv2Worker;
  let b: LockApp;
  let cApp: LockApp;
  beforeAll(async () => {
    if (c.backend === 'postgres') pg = await PostgresServer.start();
    if (c.backend === 'zookeeper') zk = await ZooKeeperServer.start();
    w = await Adv2Worker.start(c.worker());
    [b, cApp] = await Promise.all([startLockApp(c.parent()), startLockApp(c.parent())]);
  }, 90_000);
  afterAll(async () => {
    await w?.kill9();
    for (const app of [b, cApp]) await app?.close().catch(() => undefined);
    await pg?.stop();
    await zk?.stop();
    pg = undefined;
    zk = undefined;
  }, 60_000);

  it(`W is never trusted beside C's hold of keys[0], and its later token is larger (${RUNS} runs)`, async () => {
    const findings: string[] = [];
    const opts = (more: object = {}) => ({ purpose: c.purpose, backend: c.backend, ...more });
    for (let run = 1; run <= RUNS; run++) {
      const base = uniqueKey(`adv2-paused-${c.backend}`);
      const keys = Array.from({ length: c.count ?? 3 }, (_, i) => `${base}:${String(i).padStart(3, '0')}`);
      const last = keys[keys.length - 1];
      const blocker = await b.locks.acquire(last, opts({ ttl: 60_000 }));
      const id = `run${run}`;
      w.send({ op: 'acquire', id, key: keys, opts: opts({ ttl: c.ttl, wait: 60_000 }) });
      // W holds keys[0] (and keys[1]) and waits for the last.
      const deadline = Date.now() + 15_000;
      while ((await cApp.locks.inspect(keys[0], { backend: c.backend })) === null) {
        if (Date.now() > deadline) throw new Error(`run ${run}: W never held keys[0]`);
        await sleep(20);
      }
      await sleep(200);
      w.pause();
      let cLease: Lease | null = null;
      try {
        await sleep(c.pauseMs);
        const until = Date.now() + 15_000;
        while (!cLease && Date.now() < until) {
          cLease = await cApp.locks.tryAcquire(keys[0], opts({ ttl: 60_000 }));
          if (!cLease) await sleep(100);
        }
        if (!cLease) findings.push(`run ${run}: C could not take keys[0] while W was paused (W's hold outlived the pause)`);
        await blocker.release();
      } finally {
        w.resume();
      }
      // W after SIGCONT, while C still holds keys[0]: not granted, or not trusted.
      const early = await w.next((e) => (e.event === 'acquired' || e.event === 'failed') && e.id === id, 6_000).catch(() => undefined);
      if (early?.event === 'acquired') {
        const s = await w.status(id);
        const cTrusted = cLease !== null && !cLease.signal.aborted && cLease.remainingMs() > 0;
        if (s.held && !s.aborted && s.remainingMs > 0 && cTrusted) {
          findings.push(`run ${run}: TWO HOLDERS of ${keys[0]}: W granted (token ${s.token}, remainingMs ${Math.round(s.remainingMs)}) while C holds it (token ${cLease!.token})`);
        }
      }
      const cToken = cLease?.token;
      await cLease?.release();
      // C gave keys[0] back: W gets its lease now (liveness), with a token above C's.
      const outcome = early ?? (await w.next((e) => (e.event === 'acquired' || e.event === 'failed') && e.id === id, 20_000).catch(() => undefined));
      if (!outcome) findings.push(`run ${run}: W not granted within 20 s of C's release`);
      else if (outcome.event === 'failed') {
        // A request in flight across a pause longer than commandTimeoutMs times out on resume (its
        // deadline is on the monotonic clock): the README's LockBackendUnavailableError, not a
        // safety matter. Then nothing of W's may be left: every key is free for C.
        if (outcome.name !== 'LockBackendUnavailableError') findings.push(`run ${run}: W's acquire failed: ${outcome.name}: ${outcome.message}`);
        else console.log(`[adv2 ${c.backend}] run ${run}: W's acquire failed after the pause (${outcome.message})`);
        for (const key of keys) {
          const probe = await cApp.locks.tryAcquire(key, opts({ ttl: 5_000 }));
          if (!probe) findings.push(`run ${run}: W's acquire failed, but ${key} is still held`);
          await probe?.release();
        }
      }
      else if (outcome.event === 'acquired' && early === undefined && cToken !== undefined && outcome.token !== undefined && BigInt(outcome.token) <= cToken) {
        findings.push(`run ${run}: W's token ${outcome.token} not above C's ${cToken} for ${keys[0]}`);
      }
      if (outcome?.event === 'acquired') {
        // It holds every key on the server now.
        for (const key of keys) {
          const probe = await cApp.locks.tryAcquire(key, opts({ ttl: 5_000 }));
          const s = await w.status(id);
          if (probe && !s.aborted && s.remainingMs > 0) findings.push(`run ${run}: W's lease trusted but ${key} free on the server`);
          await probe?.release();
        }
      }
      w.send({ op: 'release', id });
      await w.next((e) => e.event === 'released' && e.id === id, 10_000);
    }
    expect(findings).toEqual([]);
  }, 240_000);
});
