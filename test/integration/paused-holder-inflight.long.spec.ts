import type { DistributedLockModuleOptions, Lease } from '../../lib/index.js';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';
import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { Adv2Worker } from '../workers/scripted-worker-client.js';

// Adversarial review round 3 (adv2), attack 1b: W is SIGSTOPped a few ms after it is told to
// acquire free keys (one key, or three in one etcd txn) — so the pause falls before the request,
// between request and answer (the answer waits in W's socket), or just after the grant — and
// stays frozen past its session (etcd: 2 s sessions with commandTimeoutMs 6 s, above the session
// ttl; ZooKeeper: 4 s sessions). C takes the key(s); then SIGCONT. W must not be granted a lease
// it trusts while C holds them: its session is gone, its keys with it.

interface Case {
  backend: 'etcd' | 'zookeeper';
  worker: () => DistributedLockModuleOptions;
  parent: () => DistributedLockModuleOptions;
  pauseMs: number;
}

let zk: ZooKeeperServer | undefined;
const CASES: Case[] = [
  {
    backend: 'etcd',
    worker: () => ({ etcd: { hosts: etcdHosts(), sessionTtlSeconds: 2, commandTimeoutMs: 6_000 } }),
    parent: () => ({ etcd: { hosts: etcdHosts() } }),
    pauseMs: 4_500,
  },
  {
    backend: 'zookeeper',
    worker: () => ({ zookeeper: { connectionString: zk!.connectionString, sessionTimeoutMs: 4_000, commandTimeoutMs: 8_000 } }),
    parent: () => ({ zookeeper: { connectionString: zk!.connectionString, sessionTimeoutMs: 4_000 } }),
    pauseMs: 8_000,
  },
];

const RUNS = 6;

describe.each(CASES)('a holder SIGSTOPped with its acquisition in flight, past its session ($backend)', (c) => {
  let w: Adv2Worker;
  let cApp: LockApp;
  beforeAll(async () => {
    if (c.backend === 'zookeeper') zk = await ZooKeeperServer.start();
    w = await Adv2Worker.start(c.worker());
    cApp = await startLockApp(c.parent());
  }, 90_000);
  afterAll(async () => {
    await w?.kill9();
    await cApp?.close().catch(() => undefined);
    await zk?.stop();
    zk = undefined;
  }, 60_000);

  it(`W is never trusted beside C (${RUNS} runs, single and multi-key)`, async () => {
    const findings: string[] = [];
    const opts = { purpose: 'correctness' as const, backend: c.backend };
    // Warm: W has a session and a connection before the runs.
    w.send({ op: 'acquire', id: 'warm', key: uniqueKey('adv2-warm'), opts: { ...opts, ttl: 5_000 } });
    await w.next((e) => e.event === 'acquired' && e.id === 'warm', 15_000);
    w.send({ op: 'release', id: 'warm' });
    await w.next((e) => e.event === 'released' && e.id === 'warm');
    for (let run = 1; run <= RUNS; run++) {
      const base = uniqueKey(`adv2-inflight-${c.backend}`);
      const keys = run % 2 === 0 ? [`${base}:0`, `${base}:1`, `${base}:2`] : [base];
      const id = `run${run}`;
      w.send({ op: 'acquire', id, key: keys.length === 1 ? keys[0] : keys, opts: { ...opts, ttl: 30_000, wait: 30_000 } });
      await sleep(run % 3);
      w.pause();
      const taken: Lease[] = [];
      try {
        await sleep(c.pauseMs);
        const until = Date.now() + 10_000;
        for (const key of keys) {
          let lease: Lease | null = null;
          while (!lease && Date.now() < until) {
            lease = await cApp.locks.tryAcquire(key, { ...opts, ttl: 60_000 });
            if (!lease) await sleep(100);
          }
          if (lease) taken.push(lease);
          else findings.push(`run ${run}: C could not take ${key} while W was frozen`);
        }
      } finally {
        w.resume();
      }
      const outcome = await w.next((e) => (e.event === 'acquired' || e.event === 'failed') && e.id === id, 8_000).catch(() => undefined);
      await sleep(50);
      const s = await w.status(id);
      const cTrusted = taken.length === keys.length && taken.every((l) => !l.signal.aborted && l.remainingMs() > 0);
      if (outcome?.event === 'acquired' && s.held && !s.aborted && s.remainingMs > 0 && cTrusted) {
        findings.push(`run ${run} (${keys.length} key(s)): TWO HOLDERS — W trusted (token ${s.token}, remainingMs ${Math.round(s.remainingMs)}) while C holds (tokens ${taken.map((l) => l.token).join(',')})`);
      }
      for (const l of taken) await l.release();
      // W's acquisition, if still waiting, gets the keys now; give them back.
      const late = outcome ?? (await w.next((e) => (e.event === 'acquired' || e.event === 'failed') && e.id === id, 15_000).catch(() => undefined));
      if (late?.event === 'acquired' && outcome === undefined && late.token !== undefined) {
        const maxC = taken.reduce((m, l) => (l.token! > m ? l.token! : m), 0n);
        if (BigInt(late.token) <= maxC) findings.push(`run ${run}: W's later token ${late.token} not above C's ${maxC}`);
      }
      w.send({ op: 'release', id });
      await w.next((e) => e.event === 'released' && e.id === id, 10_000);
    }
    expect(findings).toEqual([]);
  }, 200_000);
});
