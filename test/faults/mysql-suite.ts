import { killAllSessions, serverSnapshot } from './mysql-register.js';
import { cycles, proxyFault, type FaultContext, type ScenarioSpec, type Step } from './scenarios.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `ctx.nextReader()`, and when no worker reads within its time (a stall: nobody holds the key, or a
 * holder cannot reach the register), what MariaDB was doing then — its sessions, open InnoDB
 * transactions and lock waits — in the error.
 */
async function reader(ctx: FaultContext, worker?: number): Promise<number> {
  try {
    return await ctx.nextReader(worker);
  } catch (error) {
    const snapshot = await serverSnapshot(ctx.servers.mysql).catch((e: Error) => `(no snapshot: ${e.message})`);
    throw new Error(`${(error as Error).message}; MariaDB at that moment:\n${snapshot}`);
  }
}

/**
 * The MySQL scenarios (MariaDB): `correctness` leases on the MySQL backend, the register a row of a
 * table in the same database written through MySqlFence. As on PostgreSQL, a lease is a row with
 * an expiry on the server's clock — no fault here takes it away before its ttl, so two workers must
 * never both be told their leases are valid (`exclusiveValidity`), and a holder that acts past its
 * validity end is the fence's to refuse. Tokens come from an AUTO_INCREMENT the server persists:
 * they must grow across a restart and a kill -9 too (checked by `tokensAcrossServerFaults`).
 */
export function mysqlScenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  const common = { backend: 'mysql', fenced: true, exclusiveValidity: true, ttl, workMs: 60 } as const;
  return [
    {
      ...common,
      name: 'mysql-holder-faults',
      description:
        'correctness on MySQL (MariaDB), MySqlFence register in the same database; holders between read and write SIGSTOPped for 3×, 1.5× and 0.5× the ttl, and a kill -9 (a new process takes its place: the key waits out its ttl)',
      workers: 4,
      durationMs: 6_000 * scale,
      faults: (ctx) =>
        cycles(ctx, 1_000, [
          [3 * ttl, async () => ctx.pause(await reader(ctx), 3 * ttl, 'pause 3× ttl')],
          [1.5 * ttl, async () => ctx.pause(await reader(ctx), 1.5 * ttl, 'pause 1.5× ttl')],
          [1.5 * ttl, async () => ctx.kill9(await reader(ctx))],
          [0.5 * ttl, async () => ctx.pause(await reader(ctx), 0.5 * ttl, 'pause 0.5× ttl')],
        ]),
    },
    {
      ...common,
      name: 'mysql-server',
      description:
        "correctness on MySQL (MariaDB), MySqlFence register; while a holder works: KILL of every session of the backend's user (pools, doorbell listeners, the register's connections), a clean restart, a kill -9 of mariadbd and relaunch (crash recovery); tokens must grow across each",
      workers: 3,
      durationMs: 7_000 * scale,
      faults: (ctx) => {
        const server = ctx.servers.mysql;
        // Each while a holder is between read and write; the next step waits for a reader again.
        const step = (kind: string, inflict: () => Promise<string>): Step => [
          2_500,
          async () => {
            await reader(ctx);
            const fault = ctx.record({ t: ctx.now(), kind });
            fault.detail = await inflict();
            fault.end = ctx.now();
            await sleep(300);
          },
        ];
        return cycles(ctx, 1_500, [
          step('KILL (every session of the user)', async () => `${await killAllSessions(server)} sessions`),
          step('MariaDB restart', async () => (await server.restart(), 'SIGTERM, relaunch')),
          step('kill -9 MariaDB + relaunch', async () => (await server.kill(), await server.launch(), 'crash recovery')),
        ]);
      },
    },
    {
      ...common,
      name: 'mysql-network',
      description: 'correctness on MySQL (MariaDB), MySqlFence register; worker 0 behind a TCP proxy to MariaDB that blackholes mid-write and heals 2.5 s later: its write arrives late',
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
              await reader(ctx, 0);
              await proxyFault(ctx, 'blackhole', (p) => p.blackhole(), 2_500);
              await sleep(500);
            },
          ],
        ]),
    },
    {
      ...common,
      name: 'mysql-network-delay',
      outsideNpmTest: true,
      description:
        "correctness on MySQL (MariaDB), MySqlFence register; worker 0 behind a TCP proxy to MariaDB that delays every packet by 1.5× the ttl for 2 s, mid-write (its answers, the backend's and the register's, come after their timeouts), then a blackhole",
      proxied: true,
      workers: 3,
      durationMs: 9_000 * scale,
      workMs: 300,
      faults: (ctx) =>
        cycles(ctx, 1_000, [
          [
            2_000,
            async () => {
              await reader(ctx, 0);
              await proxyFault(ctx, 'delay 1.5× ttl', (p) => p.delay(1.5 * ttl), 2_000);
              await sleep(500);
            },
          ],
          [
            2_500,
            async () => {
              await reader(ctx, 0);
              await proxyFault(ctx, 'blackhole', (p) => p.blackhole(), 2_500);
              await sleep(500);
            },
          ],
        ]),
    },
  ];
}
