import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ensureBinary } from '../harness/servers.mjs';
import { DEFAULT_PARAMS } from './plan.js';
import { runSeed, startSimServers, summaryLine, violationReport, type SeedResult, type SimServers } from './runner.js';

/**
 * The CI-sized batch of the seeded simulation (`npm run test:simulation -- --long` runs hundreds
 * of seeds): a few seeds of real Nest apps in worker processes, each with its operation and fault
 * schedule, checked for the five invariants; and a negative control the checker must catch.
 * A failing seed prints the command that replays its plan. SIM_SEEDS=a,b,c picks other seeds.
 *
 * Servers are started here — Redis, three etcd members, PostgreSQL, ZooKeeper and five Redlock
 * masters (the run's default ones cannot be killed by the faults).
 */
const SEEDS = (process.env.SIM_SEEDS ?? '1,2,3').split(',').map(Number);

function save(r: SeedResult): void {
  const dir = path.resolve('.tmp/simulation');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `seed-${r.seed}${r.params.control ? `-${r.params.control}` : ''}.json`);
  writeFileSync(file, JSON.stringify({ seed: r.seed, replay: r.replay, params: r.params, faults: r.faults, violations: r.result.violations, stats: r.result.stats, intervals: r.result.intervals, events: r.events, error: r.error }, null, 1));
}

describe('seeded simulation: real apps, random operations, random faults', () => {
  let servers: SimServers;
  const lines: string[] = [];

  beforeAll(async () => {
    ensureBinary('redis-server');
    ensureBinary('etcd');
    servers = await startSimServers();
  }, 60_000);
  afterAll(async () => {
    if (lines.length) console.log(lines.join('\n'));
    await servers?.stop();
  }, 30_000);

  for (const seed of SEEDS) {
    it(`seed ${seed}: no invariant violated`, async () => {
      const r = await runSeed({ ...DEFAULT_PARAMS, seed }, servers);
      lines.push(summaryLine(r));
      if (r.result.violations.length || r.error) {
        save(r);
        throw new Error(`${violationReport(r, 12)}\n  log: .tmp/simulation/seed-${seed}.json`);
      }
      // The run must have done something worth checking.
      expect(r.result.stats.ops).toBeGreaterThan(30);
      expect(r.result.stats.grants).toBeGreaterThan(15);
      // …on PostgreSQL, ZooKeeper and Redlock too (a fifth of the locks name each): a backend that
      // only ever failed would pass the invariants.
      expect(r.result.stats.postgres.grants).toBeGreaterThan(2);
      expect(r.result.stats.zookeeper.grants).toBeGreaterThan(2);
      expect(r.result.stats.redlock.grants).toBeGreaterThan(2);
      // …and MySqlTransactionLock holders (4–14 granted per seed of 1–16 on 2 cores).
      expect(r.result.stats.mysql.xact.grants).toBeGreaterThan(0);
      expect(r.faults.filter((f) => !f.skipped).length).toBeGreaterThan(0);
      // …and the newer primitives: semaphores, multi-key leases, leaders, an operator's forceRelease().
      expect(r.result.stats.sem.grants + r.result.stats.multi.grants + r.result.stats.leader.grants).toBeGreaterThan(2);
      expect(r.result.stats.force.calls).toBeGreaterThan(1);
    }, 120_000);
  }

  it('negative control: a "lock" that does not lock is caught (overlaps, duplicate tokens, lost updates)', async () => {
    const r = await runSeed({ ...DEFAULT_PARAMS, seed: SEEDS[0], durationMs: 5_000, control: 'nolock' }, servers);
    lines.push(`control ${summaryLine(r)}`);
    const invariants = new Set(r.result.violations.map((v) => v.invariant));
    if (!invariants.has(1) || !invariants.has(3)) save(r);
    expect(r.error).toBeUndefined();
    expect(invariants).toContain(1);
    expect(invariants).toContain(3);
    // The only violations are the ones the missing lock causes.
    expect([...invariants].every((i) => i <= 3)).toBe(true);
  }, 120_000);
});
