import { cycles, type FaultContext, type ScenarioSpec, type Step } from './scenarios.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Semaphore scenarios: `workers` processes share a key with `permits` permits (ttl 1 s; etcd
 * sessions 1 s, ZooKeeper sessions = ttl) and loop acquire → work 150 ms → act → release, while
 * holders are SIGSTOPped for 1.5× and 3× the ttl (their permits expire under them, a waiter takes
 * them) and one is killed (kill -9). Checked (checker.ts `checkSemaphore`): never more than
 * `permits` holders within their validity at one instant (over-admission), each grant's token
 * unique and above every token granted before its holder asked; the paused holders that acted
 * after resuming (their validity over) are counted apart — as for a lock, only a fence on the
 * resource makes that harmless.
 */
export function semaphoreScenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  const steps = (ctx: FaultContext): Step[] => [
    [1.5 * ttl, async () => ctx.pause(await ctx.nextReader(), 1.5 * ttl, 'pause holder 1.5× ttl')],
    [3 * ttl, async () => ctx.pause(await ctx.nextReader(), 3 * ttl, 'pause holder 3× ttl')],
    [1.5 * ttl, async () => ctx.kill9(await ctx.nextReader(), 'kill -9 holder')],
  ];
  const common = { mode: 'semaphore', permits: 2, workers: 4, ttl, workMs: 150, durationMs: 7_500 * scale, faults: (ctx: FaultContext) => cycles(ctx, 1_000, steps(ctx)) } as const;
  return [
    {
      ...common,
      name: 'sem-redis',
      outsideNpmTest: true,
      description: 'semaphore (permits 2, 4 workers) on Redis, efficiency; holders SIGSTOPped for 1.5× and 3× the ttl, one killed',
      backend: 'redis',
      fenced: false,
    },
    {
      ...common,
      name: 'sem-etcd',
      description: 'semaphore (permits 2, 4 workers) on etcd (3 members, 1 s sessions), correctness; holders SIGSTOPped for 1.5× and 3× the ttl, one killed',
      backend: 'etcd',
      fenced: true,
    },
    {
      ...common,
      name: 'sem-zk',
      outsideNpmTest: true,
      description: 'semaphore (permits 2, 4 workers) on ZooKeeper (1 s sessions), correctness; holders SIGSTOPped for 1.5× and 3× the session, one killed',
      backend: 'zookeeper',
      fenced: true,
    },
  ];
}

/**
 * Leader scenarios: `workers` processes each campaign() for one name (ttl 1 s), and while leading
 * do a fenced read-modify-write of the register every ~100 ms with the term's token; on loss they
 * campaign again (a round: read, 80 ms, write, 20 ms). Faults on the current leader: SIGSTOP right after its read for 2.5× the ttl
 * (its late write must be refused), kill -9 (the next leads within about the ttl or session), SIGTERM
 * (`app.close()` hands leadership on at once). Checked (`checkLeader`): terms never overlap in
 * validity, tokens grow with every term, no stale write accepted; hand-over times per fault.
 */
export function leaderScenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  // The leader is the worker that reads: it just read, its write comes 80 ms later.
  const steps = (ctx: FaultContext): Step[] => [
    [2.5 * ttl, async () => {
      await ctx.pause(await ctx.nextReader(), 2.5 * ttl, 'SIGSTOP leader 2.5× ttl');
      await sleep(500);
    }],
    [ttl, async () => {
      await ctx.kill9(await ctx.nextReader(), 'SIGKILL leader');
      await sleep(500);
    }],
    [500, async () => {
      await ctx.terminate(await ctx.nextReader(), 'SIGTERM leader');
      await sleep(500);
    }],
  ];
  const common = { mode: 'leader', workers: 3, ttl, workMs: 20, durationMs: 9_000 * scale, faults: (ctx: FaultContext) => cycles(ctx, 1_000, steps(ctx)) } as const;
  return [
    {
      ...common,
      name: 'leader-etcd',
      description: 'leader election (3 candidates) on etcd (3 members, 1 s sessions), RedisFence register; the leader SIGSTOPped after its read for 2.5× the ttl, killed (kill -9), stopped (SIGTERM → app.close())',
      backend: 'etcd',
      fenced: true,
    },
    {
      ...common,
      name: 'leader-zk',
      outsideNpmTest: true,
      description: 'leader election (3 candidates) on ZooKeeper (1 s sessions), RedisFence register; the leader SIGSTOPped after its read for 2.5× the session, killed (kill -9), stopped (SIGTERM → app.close())',
      backend: 'zookeeper',
      fenced: true,
    },
    {
      ...common,
      name: 'leader-redis',
      outsideNpmTest: true,
      negativeControl: true,
      description:
        'NEGATIVE CONTROL for the fence: leader election on Redis (efficiency: no token), unfenced register; the same faults — terms must still not overlap, but the paused leader\'s late write lands (lost updates)',
      backend: 'redis',
      fenced: false,
    },
  ];
}
