import { mysqlScenarios } from './mysql-suite.js';
import { pgScenarios } from './pg-suite.js';
import { redlockScenarios } from './redlock-suite.js';
import { leaderScenarios, semaphoreScenarios } from './sem-leader-suite.js';
import { zkScenarios } from './zk-suite.js';
import { proxyFault, type FaultContext, type ScenarioSpec } from './scenarios.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Repeat `step` until the scenario's deadline (leaving `tail` ms of quiet at the end). */
async function untilDeadline(ctx: FaultContext, tail: number, step: () => Promise<void>): Promise<void> {
  while (ctx.now() < ctx.deadline - tail) await step();
}

/**
 * The scenarios. `scale` stretches durations: 1 for the CI-sized run inside `npm test`, larger for
 * `npm run test:faults -- --long`.
 */
export function scenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  return [
    {
      name: 'etcd-gc-pause',
      description: 'correctness on etcd, fenced register; holders SIGSTOPped for 0.5×, 1.5× and 3× the ttl between read and write',
      backend: 'etcd',
      fenced: true,
      workers: 4,
      durationMs: 14_000 * scale,
      ttl,
      workMs: 60,
      faults: (ctx) =>
        untilDeadline(ctx, 2_000, async () => {
          for (const factor of [0.5, 1.5, 3]) {
            if (ctx.now() > ctx.deadline - 2_000 - factor * ttl) return;
            await ctx.pause(await ctx.nextReader(), factor * ttl, `pause ${factor}× ttl`);
            await sleep(300);
          }
        }),
    },
    {
      name: 'etcd-leader-kill',
      description: 'correctness on etcd, fenced register; kill -9 of the etcd leader of 3 members, restart after 1.5 s',
      backend: 'etcd',
      fenced: true,
      workers: 4,
      durationMs: 12_000 * scale,
      ttl,
      workMs: 60,
      faults: (ctx) =>
        untilDeadline(ctx, 4_000, async () => {
          await sleep(1_500);
          const leader = await ctx.servers.etcd.leader();
          const fault = ctx.record({ t: ctx.now(), kind: 'kill -9 etcd leader', detail: leader.name });
          await leader.kill9();
          await sleep(1_500);
          await leader.restart();
          await ctx.servers.etcd.waitHealthy();
          fault.end = ctx.now();
        }),
    },
    {
      name: 'etcd-network',
      description: 'correctness on etcd, fenced register; worker 0 behind TCP proxies: 1.5×ttl delays, then a blackhole mid-write that heals 2.5 s later (its write arrives late)',
      backend: 'etcd',
      fenced: true,
      proxied: true,
      workers: 3,
      durationMs: 14_000 * scale,
      ttl,
      workMs: 60,
      faults: (ctx) =>
        untilDeadline(ctx, 3_000, async () => {
          await ctx.nextReader(0);
          await proxyFault(ctx, 'delay 1.5× ttl', (p) => p.delay(1.5 * ttl), 2_500);
          await sleep(500);
          await ctx.nextReader(0);
          await proxyFault(ctx, 'blackhole', (p) => p.blackhole(), 2_500);
          await sleep(1_000);
        }),
    },
    {
      name: 'etcd-clock-skew',
      description: "correctness on etcd, fenced register; worker 0's clock runs at half speed (faketime x0.5): it trusts its leases twice too long; plus 1.5×ttl pauses",
      backend: 'etcd',
      fenced: true,
      skew: '+0 x0.5',
      workers: 3,
      durationMs: 12_000 * scale,
      ttl,
      workMs: 60,
      faults: (ctx) =>
        untilDeadline(ctx, 3_000, async () => {
          await ctx.pause(await ctx.nextReader(0), 1.5 * ttl, 'pause 1.5× ttl (skewed worker)');
          await sleep(1_000);
        }),
    },
    {
      name: 'redis-restart',
      description: 'efficiency on Redis, unfenced register; kill -9 and restart of the lock Redis (no persistence) while a holder works: the key is gone, a second holder gets in',
      backend: 'redis',
      fenced: false,
      negativeControl: true,
      workers: 3,
      durationMs: 10_000 * scale,
      ttl: 3_000,
      workMs: 700,
      faults: (ctx) =>
        untilDeadline(ctx, 3_000, async () => {
          await ctx.nextReader();
          const fault = ctx.record({ t: ctx.now(), kind: 'kill -9 lock Redis + restart' });
          await ctx.servers.lockRedis.restart();
          fault.end = ctx.now();
          await sleep(2_000);
        }),
    },
    {
      name: 'control-gc-pause',
      description: 'NEGATIVE CONTROL: efficiency on Redis, unfenced register, the same SIGSTOPs of 1.5× and 3× the ttl between read and write',
      backend: 'redis',
      fenced: false,
      negativeControl: true,
      workers: 4,
      durationMs: 12_000 * scale,
      ttl,
      workMs: 60,
      faults: (ctx) =>
        untilDeadline(ctx, 2_000, async () => {
          for (const factor of [1.5, 3]) {
            if (ctx.now() > ctx.deadline - 2_000 - factor * ttl) return;
            await ctx.pause(await ctx.nextReader(), factor * ttl, `pause ${factor}× ttl`);
            await sleep(300);
          }
        }),
    },
    ...pgScenarios(scale),
    ...mysqlScenarios(scale),
    ...zkScenarios(scale),
    ...redlockScenarios(scale),
    ...semaphoreScenarios(scale),
    ...leaderScenarios(scale),
  ];
}
