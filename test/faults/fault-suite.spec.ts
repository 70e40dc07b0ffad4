import path from 'node:path';
import { ensureBinary } from '../harness/servers.mjs';
import { writeReport, summaryTable } from './report.js';
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
      console.log(`${summaryTable(results)}\n\nreport: ${path.join(dir, 'report.html')}`);
    }
    await servers?.stop();
  });

  for (const spec of scenarios(1)) {
    it(`${spec.name}: ${spec.description}`, async () => {
      const run = await runScenario(spec, servers);
      results.push(run);
      const r = run.result;
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
        if (spec.name === 'etcd-gc-pause') {
          expect(r.overlaps).toBeGreaterThan(0); // paused holders were overtaken…
          expect(r.staleRejected).toBeGreaterThan(0); // …and their late writes refused
        }
      }
    }, spec.durationMs + 60_000);
  }
});
