import { cycles, proxyFault, type ScenarioSpec, type Step } from './scenarios.js';
import { terminateAllSessions } from './pg-register.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The PostgreSQL scenarios: `correctness` leases on the PostgreSQL backend, the register a row of
 * a table in the same database written through PgFence. A lease there is a row with an expiry on
 * the database clock: no fault here takes it away before its ttl, so two workers must never both
 * be told their leases are valid (`exclusiveValidity`); a holder that acts past its validity end
 * is the fence's to refuse.
 */
export function pgScenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  const common = { backend: 'postgres', fenced: true, exclusiveValidity: true, ttl, workMs: 60 } as const;
  return [
    {
      ...common,
      name: 'pg-holder-faults',
      description:
        'correctness on PostgreSQL, PgFence register in the same database; holders between read and write SIGSTOPped for 3×, 1.5× and 0.5× the ttl, and a kill -9 (a new process takes its place: the key waits out its ttl)',
      workers: 4,
      durationMs: 10_000 * scale,
      faults: (ctx) =>
        cycles(ctx, 1_000, [
          [3 * ttl, async () => ctx.pause(await ctx.nextReader(), 3 * ttl, 'pause 3× ttl')],
          [1.5 * ttl, async () => ctx.pause(await ctx.nextReader(), 1.5 * ttl, 'pause 1.5× ttl')],
          [1.5 * ttl, async () => ctx.kill9(await ctx.nextReader())],
          [0.5 * ttl, async () => ctx.pause(await ctx.nextReader(), 0.5 * ttl, 'pause 0.5× ttl')],
        ]),
    },
    {
      ...common,
      name: 'pg-server',
      description: 'correctness on PostgreSQL, PgFence register; while a holder works: pg_terminate_backend of every session, a fast restart, a kill -9 of the postmaster and relaunch (crash recovery)',
      workers: 3,
      durationMs: 9_000 * scale,
      faults: (ctx) => {
        const server = ctx.servers.postgres;
        // Each while a holder is between read and write; the next step waits for a reader again.
        const step = (kind: string, inflict: () => Promise<string>): Step => [
          2_500,
          async () => {
            await ctx.nextReader();
            const fault = ctx.record({ t: ctx.now(), kind });
            fault.detail = await inflict();
            fault.end = ctx.now();
            await sleep(300);
          },
        ];
        return cycles(ctx, 1_500, [
          step('pg_terminate_backend (all sessions)', async () => `${await terminateAllSessions(server)} sessions`),
          step('PostgreSQL fast restart', async () => (await server.restart(), 'SIGINT, relaunch')),
          step('kill -9 PostgreSQL + relaunch', async () => (await server.kill(), await server.launch(), 'crash recovery')),
        ]);
      },
    },
    {
      ...common,
      name: 'pg-network',
      description: 'correctness on PostgreSQL, PgFence register; worker 0 behind a TCP proxy to PostgreSQL that blackholes mid-write and heals 2.5 s later: its write arrives late',
      proxied: true,
      workers: 3,
      durationMs: 6_000 * scale,
      // Long enough that the write is still to come when the controller, told of the read, cuts the line.
      workMs: 300,
      faults: (ctx) =>
        cycles(ctx, 1_000, [
          [
            2_500,
            async () => {
              await ctx.nextReader(0);
              await proxyFault(ctx, 'blackhole', (p) => p.blackhole(), 2_500);
              await sleep(500);
            },
          ],
        ]),
    },
  ];
}
