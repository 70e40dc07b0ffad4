// `npm run test:faults [-- --long] [-- --only pg-]`: the fault suite outside jest, for longer runs.
// Starts its own servers, runs every scenario (`--long`: 5× longer, twice; `--only`: those whose
// name contains the text, or one of comma-separated texts: `--only sem,leader`), writes the report, and exits 1
// if a fenced scenario accepted a stale write, lost an update or regressed a token, or if a
// negative control showed no overlap.
import path from 'node:path';
import { handOverText, semLeaderTable, writeReport, summaryTable } from './report.js';
import { runScenario, startFaultServers, type ScenarioResult } from './scenarios.js';
import { scenarios } from './suite.js';

async function main(): Promise<void> {
  const long = process.argv.includes('--long');
  const scale = long ? 5 : 1;
  const rounds = long ? 2 : 1;
  const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : '';
  const servers = await startFaultServers();
  const results: ScenarioResult[] = [];
  const problems: string[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const spec of scenarios(scale).filter((s) => only.split(',').some((part) => s.name.includes(part)))) {
        const started = Date.now();
        const run = await runScenario(spec, servers);
        run.spec.name = rounds > 1 ? `${spec.name}#${round}` : spec.name;
        results.push(run);
        const r = run.result;
        const across = r.acrossServerFaults && r.acrossServerFaults.faults > 0 ? `, tokens across ${r.acrossServerFaults.faults} server faults: ${r.acrossServerFaults.grantsChecked} grants compared, ${r.acrossServerFaults.regressions} went back` : '';
        console.log(`${run.spec.name}: ${r.acquisitions} acquisitions, ${r.staleRejected} stale refused, ${r.staleAccepted} stale accepted, ${r.lostUpdates} lost, ${r.tokenRegressions} token regressions, ${r.overlaps} overlaps, ${r.validityOverlaps} of validity (${r.unexplainedOverlaps} unexplained)${across} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
        if (run.semaphore) {
          const m = run.semaphore;
          console.log(`  semaphore (permits ${m.permits}): ${m.acquisitions} acquisitions, over-admission ${m.overAdmission} (max ${m.maxHolders} holders valid at once; control at permits−1: ${m.overAdmissionAtPermitsMinus1}), ${m.actedAfterExpiry} paused holders acting after expiry, ${m.lossesSignalled} losses signalled, token duplicates ${m.tokenDuplicates}, regressions ${m.tokenRegressions}`);
          if (m.overAdmission > 0) problems.push(`${run.spec.name}: over-admission ${m.overAdmission}, first at ${JSON.stringify(m.firstOverAdmission)}`);
          if (m.tokenDuplicates > 0 || m.tokenRegressions > 0) problems.push(`${run.spec.name}: ${m.tokenDuplicates} duplicate tokens, ${m.tokenRegressions} regressions`);
          if (m.overAdmissionAtPermitsMinus1 === 0) problems.push(`${run.spec.name}: the control (permits − 1) found nothing: the run never had ${m.permits} holders at once`);
        }
        if (run.leader) {
          const l = run.leader;
          console.log(`  leader: ${l.terms} terms, term overlaps ${l.termOverlaps}, ${l.actedAfterExpiry} paused leaders writing after their term, token regressions ${l.tokenRegressions}, hand-over ${handOverText(l.handOvers)}`);
          if (l.termOverlaps > 0) problems.push(`${run.spec.name}: ${l.termOverlaps} term overlaps, first at ${JSON.stringify(l.firstTermOverlap)}`);
          if (l.tokenRegressions > 0 || l.tokenDuplicates > 0) problems.push(`${run.spec.name}: ${l.tokenRegressions} term token regressions, ${l.tokenDuplicates} duplicates`);
          if (l.noHandOver > 0) problems.push(`${run.spec.name}: ${l.noHandOver} faults of the leader with no next leader`);
          if (spec.negativeControl && r.lostUpdates === 0 && r.staleAccepted === 0) problems.push(`${run.spec.name}: the negative control lost no update (the paused leader's late write did not land)`);
        }
        if (spec.negativeControl && r.overlaps === 0) problems.push(`${run.spec.name}: the negative control showed no overlap`);
        if (!spec.negativeControl && (r.staleAccepted > 0 || r.lostUpdates > 0 || r.tokenRegressions > 0)) {
          problems.push(`${run.spec.name}: ${r.staleAccepted} stale accepted, ${r.lostUpdates} lost, ${r.tokenRegressions} token regressions${r.acrossServerFaults?.first ? ` (across a server fault: ${JSON.stringify(r.acrossServerFaults.first)})` : ''}`);
        }
        if (spec.exclusiveValidity && r.unexplainedOverlaps > 0) {
          problems.push(`${run.spec.name}: ${r.unexplainedOverlaps} overlaps of validity windows with no loss signalled (two holders told they were valid)`);
        }
      }
    }
  } finally {
    await servers.stop();
  }
  const dir = writeReport(results, path.resolve('.tmp/fault-report'));
  const totals = results.filter((r) => !r.spec.negativeControl).reduce(
    (t, { result: r }) => ({ acq: t.acq + r.acquisitions, acked: t.acked + r.acknowledgedWrites, refused: t.refused + r.staleRejected, accepted: t.accepted + r.staleAccepted, lost: t.lost + r.lostUpdates }),
    { acq: 0, acked: 0, refused: 0, accepted: 0, lost: 0 },
  );
  console.log(`\n${summaryTable(results)}\n`);
  const semLeader = semLeaderTable(results);
  if (semLeader) console.log(`semaphores and leaders:\n${semLeader}\n`);
  console.log(`fenced scenarios: ${totals.acq} acquisitions, ${totals.acked} acknowledged writes, ${totals.refused} stale refused, ${totals.accepted} stale accepted, ${totals.lost} lost`);
  console.log(`report: ${path.join(dir, 'report.html')} (histories: ${dir}/history-*.json)`);
  if (problems.length) {
    console.log(`FAILED:\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  process.exit(0);
}

void main();
