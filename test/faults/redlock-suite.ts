import type { RedisServer } from '../harness/servers.mjs';
import { cycles, type FaultContext, type ScenarioSpec, type Step } from './scenarios.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

let turn = 0;

/** `count` of the five masters, picked in turn so that every master gets hit over a run. */
function pick(ctx: FaultContext, count: number): RedisServer[] {
  const masters = ctx.servers.redlockMasters;
  const from = turn++ % masters.length;
  return Array.from({ length: count }, (_, i) => masters[(from + i) % masters.length]);
}

/** kill -9 of `count` masters while a holder works; restarted empty (no persistence) after `downMs`. */
async function killMasters(ctx: FaultContext, count: number, downMs: number, kind: string): Promise<void> {
  await ctx.nextReader();
  const masters = pick(ctx, count);
  const fault = ctx.record({ t: ctx.now(), kind, detail: `ports ${masters.map((m) => m.port).join(', ')}, down ${downMs} ms` });
  await Promise.all(masters.map((m) => m.kill9()));
  await sleep(downMs);
  await Promise.all(masters.map((m) => m.restart()));
  fault.end = ctx.now();
}

/**
 * The Redlock scenarios: `efficiency` leases on Redlock over five independent masters without
 * persistence, the register a plain (unfenced) Redis key — Redlock issues no tokens. What the
 * algorithm promises, and only that, is checked: with at most a minority of masters losing their
 * data within a ttl (a master killed is kept out for longer than the ttl: the README's delayed
 * restart), two workers are never both told they hold a valid lease (`exclusiveValidity`), and no
 * update is lost. The negative control restarts a majority at once, empty: the caveat bites.
 */
export function redlockScenarios(scale = 1): ScenarioSpec[] {
  const ttl = 1_000;
  const common = { backend: 'redlock', fenced: false, ttl, workMs: 60 } as const;
  return [
    {
      ...common,
      name: 'redlock-masters',
      exclusiveValidity: true,
      description:
        'efficiency on Redlock (5 masters, no persistence), unfenced register; while a holder works: kill -9 of 2 masters kept down 1.5× ttl, SIGSTOP of 2 masters for 1.5× ttl, kill -9 of 3 (no majority) kept down 1.5× ttl, kill -9 of the holder',
      workers: 3,
      durationMs: 12_000 * scale,
      faults: (ctx) => {
        const steps: Step[] = [
          [1.5 * ttl, () => killMasters(ctx, 2, 1.5 * ttl, 'kill -9 2 of 5 masters')],
          [
            1.5 * ttl,
            async () => {
              await ctx.nextReader();
              const masters = pick(ctx, 2);
              const fault = ctx.record({ t: ctx.now(), kind: 'SIGSTOP 2 of 5 masters', detail: `ports ${masters.map((m) => m.port).join(', ')}, ${1.5 * ttl} ms` });
              for (const m of masters) m.pause();
              await sleep(1.5 * ttl);
              for (const m of masters) m.resume();
              fault.end = ctx.now();
            },
          ],
          [1.5 * ttl, () => killMasters(ctx, 3, 1.5 * ttl, 'kill -9 3 of 5 masters')],
          [1.5 * ttl, async () => ctx.kill9(await ctx.nextReader())],
        ];
        return cycles(ctx, 1_500, steps.map(([ms, inflict]): Step => [ms, () => inflict().then(() => sleep(300))]));
      },
    },
    {
      ...common,
      name: 'redlock-restart-control',
      outsideNpmTest: true,
      negativeControl: true,
      description:
        'NEGATIVE CONTROL: efficiency on Redlock (5 masters, no persistence), unfenced register; kill -9 of 3 of 5 masters while a holder works, restarted at once and empty: a second holder gets in',
      workers: 3,
      ttl: 3_000,
      workMs: 700,
      durationMs: 10_000 * scale,
      faults: (ctx) => cycles(ctx, 1_500, [[2_000, () => killMasters(ctx, 3, 0, 'kill -9 3 of 5 masters, restarted at once').then(() => sleep(2_000))]]),
    },
  ];
}
