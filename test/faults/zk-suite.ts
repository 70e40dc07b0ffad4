import { cycles, proxyFault, type ScenarioSpec, type Step } from './scenarios.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The ZooKeeper scenarios: `correctness` leases on ZooKeeper (session timeout = ttl = 1 s, the
 * shortest the server's 500 ms tick allows), the register in Redis behind RedisFence. A lease is
 * trusted no longer than its session is known to live, and the server ends a session no sooner
 * than a timeout after it last heard from the client: so two workers must never both be told
 * their leases are valid (`exclusiveValidity`) — a paused holder's late write is the fence's.
 */
export function zkScenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  const common = { backend: 'zookeeper', fenced: true, exclusiveValidity: true, ttl, workMs: 60 } as const;
  return [
    {
      ...common,
      name: 'zk-holder-faults',
      description:
        'correctness on ZooKeeper (1 s sessions), RedisFence register; holders between read and write SIGSTOPped for 3×, 1.5× and 0.5× the session, and a kill -9 (its znode goes with its session)',
      workers: 4,
      durationMs: 8_000 * scale,
      faults: (ctx) =>
        cycles(ctx, 1_000, [
          [3 * ttl, async () => ctx.pause(await ctx.nextReader(), 3 * ttl, 'pause 3× session')],
          [1.5 * ttl, async () => ctx.pause(await ctx.nextReader(), 1.5 * ttl, 'pause 1.5× session')],
          [1.5 * ttl, async () => ctx.kill9(await ctx.nextReader())],
          [0.5 * ttl, async () => ctx.pause(await ctx.nextReader(), 0.5 * ttl, 'pause 0.5× session')],
        ]),
    },
    {
      ...common,
      name: 'zk-server',
      outsideNpmTest: true,
      description: 'correctness on ZooKeeper, RedisFence register; kill -9 of the ZooKeeper server while a holder works, restarted at once (its data directory kept)',
      workers: 3,
      durationMs: 9_000 * scale,
      faults: (ctx) => {
        const step: Step = [
          3_000,
          async () => {
            await ctx.nextReader();
            const fault = ctx.record({ t: ctx.now(), kind: 'kill -9 ZooKeeper + restart' });
            await ctx.servers.zookeeper.restart();
            fault.end = ctx.now();
            await sleep(1_000);
          },
        ];
        return cycles(ctx, 1_500, [step]);
      },
    },
    {
      ...common,
      name: 'zk-network',
      outsideNpmTest: true,
      description: 'correctness on ZooKeeper, RedisFence register; worker 0 behind TCP proxies to ZooKeeper and the register: 1.5× session delays, then a blackhole mid-write that heals 2.5 s later (its write arrives late)',
      proxied: true,
      workers: 3,
      durationMs: 12_000 * scale,
      workMs: 300,
      faults: (ctx) =>
        cycles(ctx, 1_500, [
          [
            2_500,
            async () => {
              await ctx.nextReader(0);
              await proxyFault(ctx, 'delay 1.5× session', (p) => p.delay(1.5 * ttl), 2_500);
              await sleep(500);
            },
          ],
          [
            2_500,
            async () => {
              await ctx.nextReader(0);
              await proxyFault(ctx, 'blackhole', (p) => p.blackhole(), 2_500);
              await sleep(1_000);
            },
          ],
        ]),
    },
  ];
}
