import { DEFAULT_PARAMS, generatePlan, type LockOp } from './plan.js';
import { replayCommand } from './runner.js';

/** A seed must replay: the same parameters give the same operations and the same faults. */
describe('simulation plan', () => {
  const params = { ...DEFAULT_PARAMS, seed: 42 };

  it('is a pure function of the seed and the parameters', () => {
    expect(generatePlan(params)).toEqual(generatePlan({ ...params }));
    expect(JSON.stringify(generatePlan(params))).toBe(JSON.stringify(generatePlan(params)));
    expect(generatePlan({ ...params, seed: 43 })).not.toEqual(generatePlan(params));
  });

  it('keeps every worker stream independent of the others and of the fault schedule', () => {
    const three = generatePlan(params);
    const four = generatePlan({ ...params, workers: 4 });
    expect(four.fibers.slice(0, 3)).toEqual(three.fibers);
    const filtered = generatePlan({ ...params, faultFilter: [] });
    expect(filtered.fibers).toEqual(three.fibers);
    expect(filtered.faults).toEqual([]);
  });

  it('keeps the indices of the faults a filter keeps (minimising a failing seed)', () => {
    const full = generatePlan(params);
    expect(full.faults.length).toBeGreaterThan(1);
    const keep = [full.faults[0].index, full.faults[full.faults.length - 1].index];
    expect(generatePlan({ ...params, faultFilter: keep }).faults).toEqual([full.faults[0], full.faults[full.faults.length - 1]]);
  });

  it('covers every operation and fault kind over a few seeds, within the run', () => {
    const ops = new Set<string>();
    const steps = new Set<string>();
    const faults = new Set<string>();
    const shapes = new Set<string>();
    const plans: Array<ReturnType<typeof generatePlan>> = [];
    const walk = (op: LockOp): void => {
      ops.add(`${op.kind}/${op.purpose}`);
      if (op.deco) shapes.add(plans.at(-1)!.decorated[op.deco.method].shape + (op.deco.unsubscribeAfterMs !== undefined ? '/unsubscribed' : ''));
      for (const s of op.steps) {
        steps.add(s.s === 'rmw' ? `rmw/${s.store}/${s.token}` : s.s);
        if (s.s === 'nest') walk(s.op);
      }
    };
    for (let seed = 1; seed <= 10; seed++) {
      const plan = generatePlan({ ...params, seed });
      plans.push(plan);
      for (const worker of plan.fibers) for (const fiber of worker) for (const op of fiber) if (op.kind !== 'sleep') walk(op);
      for (const f of plan.faults) {
        faults.add(f.kind);
        expect(f.at + f.dur).toBeLessThanOrEqual(params.durationMs * 0.9);
      }
    }
    for (const kind of ['acquire', 'try', 'using', 'abort-wait', 'decorated']) for (const purpose of ['efficiency', 'correctness']) expect(ops).toContain(`${kind}/${purpose}`);
    for (const s of ['hold', 'extend', 'read', 'write-outer', 'nest', 'rmw/etcd/implicit', 'rmw/redis/explicit']) expect(steps).toContain(s);
    for (const shape of ['single', 'stacked', 'inherited', 'observable', 'observable/unsubscribed']) expect(shapes).toContain(shape);
    for (const f of ['delay', 'blackhole', 'pause', 'pause-holder', 'redis-kill', 'etcd-kill', 'app-restart', 'worker-crash']) expect(faults).toContain(f);
  });

  it('names the exact replay command, with every non-default parameter', () => {
    expect(replayCommand(params)).toBe('npm run test:simulation -- --seed 42');
    expect(replayCommand({ ...params, durationMs: 20_000, control: 'nolock', faultFilter: [1, 3] })).toBe(
      'npm run test:simulation -- --seed 42 --duration 20000 --control nolock --faults 1,3',
    );
  });
});
