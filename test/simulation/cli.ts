// `npm run test:simulation [-- options]`: the seeded simulation outside jest (compiled by
// scripts/test-simulation.mjs). Starts its own servers, runs seeds, prints per-seed and total
// figures, writes a JSON summary (and the event log of every failing seed) under .tmp/simulation/.
//
//   --seed N[,M…]     run these seeds (replay a failing one: the plan is the same)
//   --seeds N         run N seeds starting at --from (default 1)
//   --long            200 seeds (unless --seeds says otherwise)
//   --duration MS     operation phase per seed (default 9000)
//   --workers N, --fibers N, --max-ops N   plan shape (part of the replay command when not default)
//   --faults i,j|none keep only these faults of the seed's schedule (minimising)
//   --control nolock|unfenced   negative control: the checker must find violations
//   --print-plan      print the plan of --seed and exit (no servers)
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_PARAMS, describeFault, generatePlan, type ControlMode, type SimParams } from './plan.js';
import { runSeed, startSimServers, summaryLine, violationReport, type SeedResult } from './runner.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const flag = (name: string): boolean => process.argv.includes(`--${name}`);
const num = (name: string, fallback: number): number => {
  const v = arg(name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`--${name} needs a number, got ${v}`);
  return n;
};

async function main(): Promise<void> {
  const control = arg('control') as ControlMode | undefined;
  if (control !== undefined && control !== 'nolock' && control !== 'unfenced') throw new Error(`--control nolock|unfenced, got ${control}`);
  const faultsArg = arg('faults');
  const base: Omit<SimParams, 'seed'> = {
    durationMs: num('duration', DEFAULT_PARAMS.durationMs),
    workers: num('workers', DEFAULT_PARAMS.workers),
    fibers: num('fibers', DEFAULT_PARAMS.fibers),
    control,
    faultFilter: faultsArg === undefined ? undefined : faultsArg === 'none' ? [] : faultsArg.split(',').map(Number),
    maxOps: arg('max-ops') === undefined ? undefined : num('max-ops', 0),
  };
  const seedList = arg('seed')?.split(',').map(Number);
  const seeds = seedList ?? Array.from({ length: num('seeds', flag('long') ? 200 : 5) }, (_, i) => num('from', 1) + i);

  if (flag('print-plan')) {
    for (const seed of seeds) {
      const plan = generatePlan({ ...base, seed });
      console.log(JSON.stringify({ ...plan, faults: plan.faults.map(describeFault) }, null, 1));
    }
    return;
  }

  const outDir = path.resolve('.tmp/simulation');
  mkdirSync(outDir, { recursive: true });
  const servers = await startSimServers();
  const results: SeedResult[] = [];
  const started = Date.now();
  let interrupted = false;
  // Ctrl-C or a timeout: finish the seed under way, then the summary; a second signal stops at once
  // (the servers are killed by PID on exit).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (interrupted) process.exit(130);
      interrupted = true;
      console.log(`\n[simulation] ${signal}: finishing this seed, then the summary`);
    });
  }
  try {
    for (const seed of seeds) {
      if (interrupted) break;
      const r = await runSeed({ ...base, seed }, servers, { log: (line) => console.log(line) });
      results.push(r);
      console.log(summaryLine(r));
      if (r.result.violations.length || r.error) console.log(violationReport(r));
      // SIM_SAVE=1: the event log of a clean seed too.
      if (r.result.violations.length || r.error || process.env.SIM_SAVE) {
        writeFileSync(
          path.join(outDir, `seed-${seed}${control ? `-${control}` : ''}.json`),
          JSON.stringify({ seed, replay: r.replay, params: r.params, faults: r.faults, violations: r.result.violations, stats: r.result.stats, intervals: r.result.intervals, events: r.events, error: r.error }, null, 1),
        );
      }
    }
  } finally {
    await servers.stop();
  }

  // Totals.
  const faultsByKind: Record<string, { applied: number; skipped: number }> = {};
  for (const r of results) {
    for (const f of r.faults) {
      const k = (faultsByKind[f.kind] ??= { applied: 0, skipped: 0 });
      if (f.skipped) k.skipped += 1;
      else k.applied += 1;
    }
  }
  const violationsByKind: Record<string, number> = {};
  for (const r of results) for (const v of r.result.violations) violationsByKind[`inv${v.invariant}:${v.kind}`] = (violationsByKind[`inv${v.invariant}:${v.kind}`] ?? 0) + 1;
  const sum = (f: (r: SeedResult) => number): number => results.reduce((n, r) => n + f(r), 0);
  const failing = results.filter((r) => r.result.violations.length > 0 || r.error);
  const summary = {
    date: new Date().toISOString(),
    params: base,
    seeds: results.length,
    wallSeconds: Math.round((Date.now() - started) / 1000),
    operations: sum((r) => r.result.stats.ops),
    grants: sum((r) => r.result.stats.grants),
    reentrantGrants: sum((r) => r.result.stats.reentrantGrants),
    decoratedCalls: sum((r) => r.result.stats.decorated.calls),
    decoratedGrants: sum((r) => r.result.stats.decorated.grants),
    busy: sum((r) => r.result.stats.busy),
    leasesLost: sum((r) => Object.values(r.result.stats.lost).reduce((a, b) => a + b, 0)),
    writes: mergeCounts(results.map((r) => r.result.stats.writes)),
    postgres: { grants: sum((r) => r.result.stats.postgres.grants), writes: mergeCounts(results.map((r) => r.result.stats.postgres.writes)) },
    mysql: {
      grants: sum((r) => r.result.stats.mysql.grants),
      writes: mergeCounts(results.map((r) => r.result.stats.mysql.writes)),
      // MySqlTransactionLock holders: calls, grants (in `grants` too), busy, failed, how they ended.
      transactions: {
        calls: sum((r) => r.result.stats.mysql.xact.calls),
        grants: sum((r) => r.result.stats.mysql.xact.grants),
        busy: sum((r) => r.result.stats.mysql.xact.busy),
        failed: sum((r) => r.result.stats.mysql.xact.failed),
        ends: mergeCounts(results.map((r) => r.result.stats.mysql.xact.ends)),
        endedBySession: sum((r) => r.result.stats.mysql.xact.cut),
      },
    },
    zookeeper: { grants: sum((r) => r.result.stats.zookeeper.grants), writes: mergeCounts(results.map((r) => r.result.stats.zookeeper.writes)) },
    redlock: { grants: sum((r) => r.result.stats.redlock.grants) },
    semaphore: { grants: sum((r) => r.result.stats.sem.grants), maxHolders: Math.max(0, ...results.map((r) => r.result.stats.sem.maxHolders)) },
    multiKey: { grants: sum((r) => r.result.stats.multi.grants) },
    leader: { terms: sum((r) => r.result.stats.leader.grants) },
    forceRelease: {
      calls: sum((r) => r.result.stats.force.calls),
      released: sum((r) => r.result.stats.force.released),
      failed: sum((r) => r.result.stats.force.failed),
      leasesEnded: sum((r) => r.result.stats.force.forced),
      told: sum((r) => r.result.stats.force.told),
      maxTellMs: Math.round(Math.max(0, ...results.map((r) => r.result.stats.force.maxTellMs))),
    },
    watcher: {
      watches: sum((r) => r.result.stats.watch.watches),
      fired: sum((r) => r.result.stats.watch.fired),
      forced: sum((r) => r.result.stats.watch.released),
      requeued: sum((r) => r.result.stats.force.requeued),
    },
    stepdown: {
      terms: sum((r) => r.result.stats.stepdown.terms),
      workEndedBySignal: sum((r) => r.result.stats.stepdown.bySignal),
      workEndedByTime: sum((r) => r.result.stats.stepdown.byTime),
    },
    closedApps: {
      closes: sum((r) => r.result.stats.closed.closes),
      keys: sum((r) => r.result.stats.closed.keys),
      unanswered: sum((r) => r.result.stats.closed.failed),
      heldAfter: sum((r) => r.result.stats.closed.held),
      excused: sum((r) => r.result.stats.closed.excused),
    },
    failures: mergeCounts(results.map((r) => r.result.stats.failures)),
    writesAfterLeaseEnd: sum((r) => r.result.stats.writesAfterLeaseEnd),
    reasons: Object.fromEntries(Object.entries(mergeCounts(results.map((r) => r.result.stats.reasons))).sort((a, b) => b[1] - a[1])),
    faultsByKind,
    violations: sum((r) => r.result.violations.length),
    violationsByKind,
    runErrors: results.filter((r) => r.error).length,
    failingSeeds: failing.map((r) => ({ seed: r.seed, violations: r.result.violations.length, kinds: [...new Set(r.result.violations.map((v) => `inv${v.invariant}:${v.kind}`))], replay: r.replay, error: r.error?.split('\n')[0] })),
    livenessMaxMs: Math.round(Math.max(0, ...results.map((r) => r.result.stats.livenessMaxMs ?? 0))),
    perSeed: results.map((r) => ({
      seed: r.seed,
      seconds: Math.round(r.elapsedMs / 100) / 10,
      ops: r.result.stats.ops,
      grants: r.result.stats.grants,
      faults: r.faults.filter((f) => !f.skipped).length,
      endCrash: r.faults.some((f) => f.kind === 'end-crash'),
      livenessMs: Math.round(r.result.stats.livenessMaxMs ?? 0),
      violations: r.result.violations.length,
    })),
  };
  const file = path.join(outDir, `summary-${control ? `${control}-` : ''}${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify(summary, null, 1));

  console.log('\n=== simulation summary ===');
  console.log(`seeds ${summary.seeds} in ${summary.wallSeconds} s; ${summary.operations} operations, ${summary.grants} grants (${summary.reentrantGrants} reentrant), ${summary.busy} busy, ${summary.leasesLost} leases lost; decorated methods: ${summary.decoratedCalls} calls, ${summary.decoratedGrants} grants`);
  console.log(`fenced writes: ${Object.entries(summary.writes).map(([k, n]) => `${k} ${n}`).join(', ')} (${summary.writesAfterLeaseEnd} acknowledged after the writer's lease had ended)`);
  console.log(`postgres: ${summary.postgres.grants} grants, PgFence writes ${Object.entries(summary.postgres.writes).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  const tx = summary.mysql.transactions;
  console.log(
    `mysql: ${summary.mysql.grants} grants (${summary.mysql.grants - tx.grants} leases, ${tx.grants} transactions of ${tx.calls}: ${tx.busy} busy, ${tx.failed} failed; ended ${Object.entries(tx.ends).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}; ${tx.endedBySession} by a session end first), MySqlFence writes ${Object.entries(summary.mysql.writes).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`,
  );
  console.log(`zookeeper: ${summary.zookeeper.grants} grants, register writes ${Object.entries(summary.zookeeper.writes).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  console.log(`redlock: ${summary.redlock.grants} grants (efficiency only: no register)`);
  console.log(`edge fiber: watcher ${summary.watcher.watches} watches, ${summary.watcher.fired} fired, ${summary.watcher.forced} forced, ${summary.watcher.requeued} of those leases queued again for the key and held it; ${summary.stepdown.terms} step-downs (work ended by the signal ${summary.stepdown.workEndedBySignal}, by time ${summary.stepdown.workEndedByTime}); ${summary.closedApps.closes} closes looked at (${summary.closedApps.keys} keys, ${summary.closedApps.heldAfter} held after, ${summary.closedApps.excused} excused)`);
  console.log(`faults: ${Object.entries(faultsByKind).map(([k, n]) => `${k} ${n.applied}${n.skipped ? ` (+${n.skipped} skipped)` : ''}`).join(', ')}`);
  console.log(`violations: ${summary.violations}${summary.violations ? ` — ${Object.entries(violationsByKind).map(([k, n]) => `${k} ×${n}`).join(', ')}` : ''}`);
  if (summary.runErrors) console.log(`run errors: ${summary.runErrors}`);
  for (const f of summary.failingSeeds) console.log(`  FAIL seed ${f.seed}: ${f.kinds.join(', ')}${f.error ? ` (run error: ${f.error})` : ''} — ${f.replay}`);
  console.log(`summary: ${file}`);

  if (control) {
    // A negative control must be caught.
    const caught = summary.violations > 0;
    console.log(caught ? `control ${control}: the checker caught it` : `control ${control}: NOT caught — the checker proves nothing`);
    process.exit(caught ? 0 : 1);
  }
  process.exit(failing.length ? 1 : 0);
}

function mergeCounts(list: Array<Record<string, number>>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const counts of list) for (const [k, n] of Object.entries(counts)) out[k] = (out[k] ?? 0) + n;
  return out;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(2);
});
