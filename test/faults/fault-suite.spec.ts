import path from 'node:path';
import { ensureBinary } from '../harness/servers.mjs';
import { firstGrantAfter } from './checker.js';
import { semLeaderTable, writeReport, summaryTable } from './report.js';
import { runScenario, startFaultServers, type FaultServers, type ScenarioResult } from './scenarios.js';
import { scenarios } from './suite.js';

/**
 * The CI-sized fault suite (`npm run test:faults -- --long` runs the same scenarios longer).
 * Fenced scenarios must show the faults happening (stale writes refused) and none getting
 * through; the negative controls must show the same faults biting when nothing fences them.
 */
describe('fault suite: no stale write accepted, no acknowledged update lost', () => {
  let servers: FaultServers;
  const results: ScenarioResult[] = [];

  beforeAll(async () => {
    ensureBinary('faketime');
    servers = await startFaultServers();
  }, 60_000);
  afterAll(async () => {
    if (results.length) {
      const dir = writeReport(results, path.resolve('.tmp/fault-report'));
      console.log(`${summaryTable(results)}\n\n${semLeaderTable(results)}\n\nreport: ${path.join(dir, 'report.html')}`);
    }
    await servers?.stop();
  });

  // The ones marked outsideNpmTest run in `npm run test:faults` (the suite's own time budget).
  for (const spec of scenarios(1).filter((s) => !s.outsideNpmTest)) {
    it(`${spec.name}: ${spec.description}`, async () => {
      const run = await runScenario(spec, servers);
      results.push(run);
      const r = run.result;
      if (run.semaphore) return expectSemaphoreInvariants(run);
      if (run.leader) return expectLeaderInvariants(run);
      expect(r.acquisitions).toBeGreaterThan(5);
      if (spec.negativeControl) {
        // A fault run that shows no overlap proves nothing: the faults must bite here.
        expect(r.overlaps).toBeGreaterThan(0);
        if (spec.name === 'control-gc-pause') expect(r.lostUpdates).toBeGreaterThan(0);
      } else {
        expect(r.staleAccepted).toBe(0);
        expect(r.lostUpdates).toBe(0);
        expect(r.tokenRegressions).toBe(0);
        expect(r.acknowledgedWrites).toBeGreaterThan(5);
        if (spec.name === 'etcd-gc-pause' || spec.name === 'pg-holder-faults' || spec.name === 'mysql-holder-faults' || spec.name === 'zk-holder-faults') {
          expect(r.overlaps).toBeGreaterThan(0); // paused holders were overtaken…
          expect(r.staleRejected).toBeGreaterThan(0); // …and their late writes refused
        }
        // A lease on PostgreSQL or MySQL is a row no fault here removes before its ttl: two workers are
        // never both told they hold a valid lease, unless the earlier one was told it lost it.
        if (spec.exclusiveValidity) expect(r.unexplainedOverlaps).toBe(0);
        // A holder paused past its ttl (session) learns on SIGCONT; a killed holder's key moves on
        // once its ttl (PostgreSQL, 1 s: measured 0.95 s after the kill) or its session (ZooKeeper,
        // 1 s: measured 1.2 s) has run out.
        const killBoundMs = ({ 'pg-holder-faults': 3_000, 'mysql-holder-faults': 3_000, 'zk-holder-faults': 4_000 } as Record<string, number>)[spec.name];
        if (killBoundMs !== undefined) {
          expect(r.lossesSignalled).toBeGreaterThan(0);
          const kills = run.faults.filter((f) => f.kind.startsWith('kill -9'));
          expect(kills.length).toBeGreaterThan(0);
          for (const kill of kills) expect(firstGrantAfter(run.history, kill.t)).toBeLessThan(killBoundMs);
        }
        if (spec.name === 'pg-server') {
          // Grants resume after each server fault: measured 0.3 s (terminate), 1.7 s (restart), 2.1 s (kill -9).
          expect(new Set(run.faults.map((f) => f.kind)).size).toBe(3);
          for (const fault of run.faults) expect(firstGrantAfter(run.history, fault.end!)).toBeLessThan(5_000);
        }
        if (spec.name === 'mysql-server') {
          expect(new Set(run.faults.map((f) => f.kind)).size).toBe(3);
          for (const fault of run.faults) expect(firstGrantAfter(run.history, fault.end!)).toBeLessThan(5_000);
          // The AUTO_INCREMENT the tokens come from kept its place across the restart and the kill -9:
          // grants asked for after each were compared with every token before it (and none went back).
          const across = r.acrossServerFaults!;
          expect({ regressions: across.regressions, first: across.first }).toEqual({ regressions: 0, first: undefined });
          // At least one of the two server faults compared. Both, unless the only grant asked after the
          // restart came only after the kill -9 had begun: a fresh-clone `npm test` had 1 (the one that
          // counts is the invariant above, checked on every grant compared).
          expect(across.faults).toBeGreaterThanOrEqual(1);
          expect(across.grantsChecked).toBeGreaterThan(0);
        }
        if (spec.name === 'redlock-masters') {
          // Every kind of fault happened, while a holder worked.
          expect(new Set(run.faults.map((f) => f.kind)).size).toBe(4);
          for (const fault of run.faults) {
            const grantsDuring = run.history.filter((e) => e.e === 'acquired' && e.t > fault.t && e.t < fault.end!);
            // 3 of 5 masters are a majority: locks are still taken while 2 are dead or paused…
            // (Measured under 6 extra CPU-bound processes, 10 windows: the first grant 63–306 ms
            // after the fault, the longest gap between grants 380 ms, in a window of 1.5 s.)
            if (/2 of 5/.test(fault.kind) && grantsDuring.length === 0) {
              // Say what the workers did instead, so that a failure can be read.
              const seen = run.history.filter((e) => e.t > fault.t - 200 && e.t < fault.end! + 200).map((e) => `${e.t.toFixed(0)} w${e.worker} ${e.e}${e.reason ? ` ${e.reason}` : ''}`);
              throw new Error(`no grant while ${fault.kind} (${fault.t.toFixed(0)}–${fault.end!.toFixed(0)} ms): a majority was up. Events:\n${seen.join('\n')}`);
            }
            // …and never while only 2 are up (the masters are restarted 1.5 s after the kill).
            if (fault.kind === 'kill -9 3 of 5 masters') expect(grantsDuring.filter((e) => e.t > fault.t + 300 && e.t < fault.t + 1_500)).toEqual([]);
            // Grants resume after each fault: a dead holder's key waits out its ttl (1 s), and the
            // restarted masters are reconnected within the clients' back-off.
            const resumed = fault.kind === 'kill -9 holder' ? firstGrantAfter(run.history, fault.t) : firstGrantAfter(run.history, fault.end!);
            expect(resumed).toBeLessThan(3_000);
          }
        }
        if (spec.name === 'pg-network' || spec.name === 'mysql-network') {
          // The write sent into the blackhole reached the server after the heal, and the fence refused it.
          expect(run.history.filter((e) => e.e === 'write-stale' && e.reason === 'late').length).toBeGreaterThan(0);
        }
      }
    }, spec.durationMs + 60_000);
  }
});

const fencing = (run: ScenarioResult): boolean => run.spec.backend !== 'redis' && run.spec.backend !== 'redlock';

/**
 * Semaphores: never more than `permits` holders within their validity at once, while paused
 * holders' permits expire under them and a killed holder's is freed by its ttl or session.
 */
function expectSemaphoreInvariants(run: ScenarioResult): void {
  const m = run.semaphore!;
  expect(m.acquisitions).toBeGreaterThan(10);
  expect({ overAdmission: m.overAdmission, first: m.firstOverAdmission }).toEqual({ overAdmission: 0, first: undefined });
  // The check can fail: the same windows against permits − 1 find violations (the run had
  // `permits` holders at once), and the pauses bit (paused holders acted after their permit ended).
  expect(m.maxHolders).toBe(m.permits);
  expect(m.overAdmissionAtPermitsMinus1).toBeGreaterThan(0);
  expect(m.actedAfterExpiry).toBeGreaterThan(0);
  expect(new Set(run.faults.map((f) => f.kind)).size).toBe(3);
  if (fencing(run)) {
    expect({ duplicates: m.tokenDuplicates, regressions: m.tokenRegressions }).toEqual({ duplicates: 0, regressions: 0 });
    expect(run.result.tokenRegressions).toBe(0);
  }
}

/**
 * Leaders: terms never overlap in validity, tokens grow with every term, a paused leader's late
 * write is refused by the fence; the next leader comes within about the ttl (session) after a
 * pause or kill of the leader (measured 0.74–1.5 s), at once after a graceful stop (measured 9–366 ms on a
 * loaded machine; the bound, 750 ms, is twice that worst and still below the pause and kill
 * hand-overs, which wait for the old term's ttl or session).
 */
function expectLeaderInvariants(run: ScenarioResult): void {
  const l = run.leader!;
  const r = run.result;
  expect({ termOverlaps: l.termOverlaps, first: l.firstTermOverlap }).toEqual({ termOverlaps: 0, first: undefined });
  expect(l.terms).toBeGreaterThan(run.faults.length);
  expect(l.noHandOver).toBe(0);
  expect(l.actedAfterExpiry).toBeGreaterThan(0); // the paused leader wrote after its term…
  expect(r.acknowledgedWrites).toBeGreaterThan(5);
  for (const [kind, times] of Object.entries(l.handOvers)) {
    for (const ms of times) expect({ kind, ms, ok: ms < (kind.startsWith('SIGTERM') ? 750 : 3_000) }).toMatchObject({ ok: true });
  }
  expect(Object.keys(l.handOvers).length).toBe(3);
  if (fencing(run)) {
    expect(r.staleRejected).toBeGreaterThan(0); // …and the fence refused it
    expect(r.staleAccepted).toBe(0);
    expect(r.lostUpdates).toBe(0);
    expect({ regressions: l.tokenRegressions, duplicates: l.tokenDuplicates }).toEqual({ regressions: 0, duplicates: 0 });
  } else {
    // Negative control: no fence, so the paused leader's late write lands over its successor's.
    expect(r.lostUpdates).toBeGreaterThan(0);
  }
}
