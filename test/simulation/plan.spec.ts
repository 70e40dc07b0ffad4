import { DEFAULT_PARAMS, EDGE_KEYS, generatePlan, keyCount, type FiberOp, type LockOp, type Plan } from './plan.js';
import { replayCommand } from './runner.js';

/** The fibers without the edge fiber (the last of its worker's). */
const withoutEdge = (plan: Plan): FiberOp[][][] => plan.fibers.map((fibers, w) => (plan.edge && w === plan.edge.worker ? fibers.slice(0, -1) : fibers));

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
    // (The edge fiber's worker is drawn among the workers: it may be another one.)
    expect(withoutEdge(four).slice(0, 3)).toEqual(withoutEdge(three));
    const filtered = generatePlan({ ...params, faultFilter: [] });
    expect(filtered.fibers).toEqual(three.fibers);
    expect(filtered.faults).toEqual([]);
    // Minimising with fewer operations keeps the faults (the Redlock restart delay does not follow the drawn ttls).
    expect(generatePlan({ ...params, maxOps: 2 }).faults).toEqual(three.faults);
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
    const targets = new Set<string>();
    const walk = (op: LockOp): void => {
      ops.add(`${op.kind}/${op.purpose}`);
      if (op.backend) ops.add(`${op.kind}/${op.purpose}/${op.backend}`);
      if (op.deco) shapes.add(plans.at(-1)!.decorated[op.deco.method].shape + (op.deco.unsubscribeAfterMs !== undefined ? '/unsubscribed' : ''));
      for (const s of op.steps) {
        steps.add(s.s === 'rmw' ? `rmw/${s.store}/${s.token}${s.tx ? '/tx' : ''}` : s.s === 'read' || s.s === 'write-outer' ? `${s.s}/${s.store}` : s.s);
        if (s.s === 'nest') walk(s.op);
      }
    };
    for (let seed = 1; seed <= 10; seed++) {
      const plan = generatePlan({ ...params, seed });
      plans.push(plan);
      for (const worker of plan.fibers) for (const fiber of worker) for (const op of fiber) if (op.kind !== 'sleep' && op.kind !== 'force') walk(op);
      for (const f of plan.faults) {
        faults.add(f.kind);
        if (f.kind === 'delay' || f.kind === 'blackhole') for (const t of f.targets) targets.add(t);
        expect(f.at + f.dur).toBeLessThanOrEqual(params.durationMs * 0.9);
      }
    }
    for (const kind of ['acquire', 'try', 'using', 'abort-wait', 'decorated']) for (const purpose of ['efficiency', 'correctness']) expect(ops).toContain(`${kind}/${purpose}`);
    for (const s of ['hold', 'extend', 'read/etcd', 'read/redis', 'write-outer/etcd', 'write-outer/redis', 'nest', 'rmw/etcd/implicit', 'rmw/redis/explicit']) expect(steps).toContain(s);
    for (const shape of ['single', 'stacked', 'inherited', 'observable', 'observable/unsubscribed']) expect(shapes).toContain(shape);
    for (const f of ['delay', 'blackhole', 'pause', 'pause-holder', 'redis-kill', 'etcd-kill', 'pg-kill', 'pg-restart', 'pg-terminate', 'zk-kill', 'zk-pause', 'redlock-kill', 'redlock-pause', 'my-kill', 'my-restart', 'my-kill-sessions', 'my-pause', 'app-restart', 'worker-crash']) expect(faults).toContain(f);
    // PostgreSQL: every kind of call for both purposes, its register both ways, its proxy.
    for (const kind of ['acquire', 'try', 'using', 'decorated']) for (const purpose of ['efficiency', 'correctness']) expect(ops).toContain(`${kind}/${purpose}/postgres`);
    for (const s of ['rmw/postgres/explicit', 'rmw/postgres/implicit', 'rmw/postgres/explicit/tx', 'rmw/postgres/implicit/tx', 'read/postgres', 'write-outer/postgres']) expect(steps).toContain(s);
    // MySQL (PostgreSQL locks moved there): every kind of call but decorated ones (a declaration keeps its backend), its register both ways, its proxy.
    for (const kind of ['acquire', 'try', 'using']) for (const purpose of ['efficiency', 'correctness']) expect(ops).toContain(`${kind}/${purpose}/mysql`);
    for (const purpose of ['efficiency', 'correctness']) expect(ops).not.toContain(`decorated/${purpose}/mysql`);
    for (const s of ['rmw/mysql/explicit', 'rmw/mysql/implicit', 'rmw/mysql/explicit/tx', 'rmw/mysql/implicit/tx', 'read/mysql', 'write-outer/mysql']) expect(steps).toContain(s);
    // ZooKeeper: the same, with its own EtcdFence register (no transactions there).
    for (const kind of ['acquire', 'try', 'using', 'decorated']) for (const purpose of ['efficiency', 'correctness']) expect(ops).toContain(`${kind}/${purpose}/zookeeper`);
    for (const s of ['rmw/zookeeper/explicit', 'rmw/zookeeper/implicit', 'read/zookeeper', 'write-outer/zookeeper']) expect(steps).toContain(s);
    for (const s of steps) expect(s.startsWith('rmw/zookeeper/') && s.endsWith('/tx')).toBe(false);
    // Redlock: every kind of call, efficiency only (no tokens: no register of its own).
    for (const kind of ['acquire', 'try', 'using', 'abort-wait', 'decorated']) expect(ops).toContain(`${kind}/efficiency/redlock`);
    for (const op of ops) expect(op.endsWith('/correctness/redlock')).toBe(false);
    for (const t of ['redis', 'etcd', 'postgres', 'mysql', 'zookeeper', 'redlock', 'register']) expect(targets).toContain(t);
  });

  it('keeps each register to one lock\'s tokens, one purpose per PostgreSQL or ZooKeeper key in a context, and Redlock to efficiency', () => {
    let checked = 0;
    let checkedZk = 0;
    const visit = (plan: Plan, op: LockOp, outer: LockOp | undefined): void => {
      // Every lock is on a key of the plan.
      const keys = [op.key, ...(op.deco ? [op.deco.key2] : [])];
      for (const k of [...keys, ...(op.keys ?? [])]) expect(Number.isInteger(k) && k >= 0 && k < keyCount(plan)).toBe(true);
      // The library refuses correctness on Redlock (no fencing tokens).
      if (op.backend === 'redlock') expect(op.purpose).toBe('efficiency');
      for (const s of op.steps) {
        // PgFence registers for PostgreSQL leases only, the ZooKeeper register for ZooKeeper leases
        // only (their tokens and etcd's revisions are different sequences).
        for (const named of ['postgres', 'mysql', 'zookeeper']) {
          if (s.s === 'rmw' || s.s === 'read') expect(s.store === named).toBe(op.backend === named);
          if (s.s === 'write-outer') expect(s.store === named).toBe(outer?.backend === named);
        }
        if (s.s === 'rmw' && s.tx) expect(['postgres', 'mysql']).toContain(s.store);
        if (s.s === 'nest') visit(plan, s.op, op);
      }
      if (!outer) return;
      // A nested lock on the enclosing PostgreSQL or ZooKeeper lease's key is the same lock (one
      // lock per key whatever the purpose): the same purpose, or the library refuses it. (Routed, the
      // other purpose is another backend.)
      // The enclosing context holds its own lock and, for a decorated call, its second declaration's.
      const locksOf = (o: LockOp): Array<{ key: number; purpose: string; backend?: string }> => {
        const spec = o.deco ? plan.decorated[o.deco.method] : undefined;
        return spec && o.deco && (spec.shape === 'stacked' || spec.shape === 'inherited') ? [o, { key: o.deco.key2, purpose: spec.purpose2, backend: spec.backend2 }] : [o];
      };
      for (const lock of locksOf(op)) {
        for (const held of locksOf(outer)) {
          if (lock.key === held.key && lock.backend !== undefined && lock.backend === held.backend) {
            expect(lock.purpose).toBe(held.purpose);
            checked += 1;
            if (lock.backend === 'zookeeper') checkedZk += 1;
          }
        }
      }
    };
    const redlockKills: number[] = [];
    for (let seed = 1; seed <= 80; seed++) {
      const plan = generatePlan({ ...params, seed });
      for (const spec of plan.decorated) {
        expect([undefined, 'postgres', 'zookeeper', 'redlock']).toContain(spec.backend);
        if (spec.backend === 'redlock') expect(spec.purpose).toBe('efficiency');
        if (spec.backend2 === 'redlock') expect(spec.purpose2).toBe('efficiency');
      }
      for (const f of plan.faults) {
        if (f.kind !== 'redlock-kill' && f.kind !== 'redlock-pause') continue;
        expect(new Set(f.masters).size).toBe(f.masters.length);
        for (const m of f.masters) expect(m >= 0 && m < 5).toBe(true);
        if (f.kind === 'redlock-pause') expect(f.masters.length).toBeLessThanOrEqual(2);
        else {
          // Restarted empty only once every lease and extend of the plan has run out (the README's
          // delayed restart).
          expect(f.dur).toBeGreaterThanOrEqual(plan.maxTtl + 500);
          redlockKills.push(f.masters.length);
        }
      }
      for (const worker of plan.fibers) for (const fiber of worker) for (const op of fiber) if (op.kind !== 'sleep' && op.kind !== 'force') visit(plan, op, undefined);
      // The negative controls stay on the routed backends.
      for (const control of ['nolock', 'unfenced'] as const) {
        const controlPlan = JSON.stringify(generatePlan({ ...params, seed, control }));
        expect(controlPlan).not.toContain('postgres');
        expect(controlPlan).not.toMatch(/zookeeper|zk-|redlock|mysql|my-/);
      }
    }
    // Mostly a minority of the masters killed, now and then a majority.
    expect(redlockKills).toEqual(expect.arrayContaining([1, 2, 3]));
    expect(redlockKills.filter((n) => n === 3).length).toBeLessThan(redlockKills.length / 4);
    expect(checked).toBeGreaterThan(20);
    expect(checkedZk).toBeGreaterThan(10);
  });

  it('draws semaphores, multi-key leases, campaigns and forceRelease() consistently, and none in the controls', () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      const plan = generatePlan({ ...params, seed });
      const p = plan.primitives!;
      seen.add(`sem/${p.sem.backend ?? p.sem.purpose}`);
      seen.add(`leader/${p.leader.backend ?? p.leader.purpose}`);
      // The operator's fiber: the one after its worker's own, sleeps and forceRelease() only.
      const operator = plan.fibers[plan.operator!][params.fibers];
      expect(withoutEdge(plan)[plan.operator!]).toHaveLength(params.fibers + 1);
      for (const op of operator) {
        expect(['sleep', 'force']).toContain(op.kind);
        if (op.kind !== 'force') continue;
        seen.add(`force/${op.target.ns ?? 'key'}`);
        if (op.target.ns === 'sem') expect([op.target.key, op.target.purpose, op.target.backend]).toEqual([0, p.sem.purpose, p.sem.backend]);
        if (op.target.backend === 'redlock') expect(op.target.purpose).toBe('efficiency');
      }
      for (const op of withoutEdge(plan).flat(2)) {
        if (op.kind === 'force') expect(operator).toContain(op);
        if (op.kind === 'sleep' || op.kind === 'force') continue;
        if (op.ns === 'sem') {
          // Every caller of the semaphore agrees on its permits and its lock; no fenced step (several holders).
          seen.add(`sem-op/${op.kind}`);
          expect([op.key, op.permits, op.purpose, op.backend]).toEqual([0, p.sem.permits, p.sem.purpose, p.sem.backend]);
          expect(op.steps.every((s) => s.s === 'hold' || s.s === 'extend')).toBe(true);
        } else if (op.kind === 'campaign') {
          seen.add('campaign');
          expect([op.ns, op.key, op.purpose, op.backend]).toEqual(['leader', 0, p.leader.purpose, p.leader.backend]);
          for (const s of op.steps) if (s.s === 'rmw') expect(s.token).toBe('explicit');
        } else if (op.keys) {
          seen.add(`multi/${op.kind}`);
          expect(op.keys).toHaveLength(2);
          expect(op.keys[0]).not.toBe(op.keys[1]);
          expect(op.key).toBe(op.keys[0]);
          for (const k of op.keys) expect(k >= 0 && k < plan.keys).toBe(true);
          for (const s of op.steps) {
            expect(['hold', 'extend', 'rmw']).toContain(s.s);
            if (s.s === 'rmw') {
              seen.add(`multi-rmw/${s.token}`);
              expect(op.keys).toContain(s.key);
              expect(op.purpose).toBe('correctness');
            }
          }
        }
      }
      for (const control of ['nolock', 'unfenced'] as const) {
        const c = generatePlan({ ...params, seed, control });
        expect(c.primitives).toBeUndefined();
        expect(JSON.stringify(c.fibers)).not.toMatch(/"ns"|"keys"|"permits"|campaign|force/);
      }
    }
    for (const s of ['sem/efficiency', 'sem/correctness', 'sem/zookeeper', 'leader/correctness', 'leader/zookeeper', 'force/key', 'force/sem', 'force/leader', 'campaign'])
      expect(seen).toContain(s);
    for (const kind of ['acquire', 'try', 'using']) {
      expect(seen).toContain(`sem-op/${kind}`);
      expect(seen).toContain(`multi/${kind}`);
    }
    expect(seen).toContain('multi-rmw/implicit');
    expect(seen).toContain('multi-rmw/explicit');
  });

  it('draws the edge fiber from a stream of its own: multi-key leases of 3-10 keys with k0, blockers, watches, closes; step-downs with work on term.signal', () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= 20; seed++) {
      const plan = generatePlan({ ...params, seed });
      const edge = plan.edge!;
      // One more fiber, the last of its worker's; the watcher is another worker.
      expect(plan.fibers[edge.worker]).toHaveLength(params.fibers + 1 + (plan.operator === edge.worker ? 1 : 0));
      expect(edge.watcher).not.toBe(edge.worker);
      expect(keyCount(plan)).toBe(EDGE_KEYS);
      for (const op of plan.fibers[edge.worker].at(-1)!) {
        if (op.kind === 'sleep') continue;
        expect(op.kind).not.toBe('force');
        if (op.kind === 'force') continue;
        if (op.kind === 'campaign') {
          seen.add(`stepdown${op.rival ? '/rival' : ''}`);
          const p = plan.primitives!.leader;
          expect([op.ns, op.key, op.purpose, op.backend]).toEqual(['leader', 0, p.purpose, p.backend]);
          expect(op.stepDownAfterMs).toBeGreaterThan(0);
          // The work outlasts the step-down: it must stop when the term ends.
          const work = op.steps.find((s) => s.s === 'work');
          expect(work && work.s === 'work' && work.ms > op.stepDownAfterMs!).toBe(true);
          if (work && work.s === 'work' && work.store) seen.add('stepdown/work-rmw');
          continue;
        }
        const keys = op.keys!;
        seen.add(`multi/${op.backend ?? op.purpose}/${op.kind}`);
        expect(keys.length >= 3 && keys.length <= EDGE_KEYS).toBe(true);
        expect(new Set(keys).size).toBe(keys.length);
        expect(keys).toContain(0);
        expect(op.key).toBe(keys[0]);
        if (op.backend === undefined && op.purpose === 'efficiency') seen.add('multi/redis');
        if (op.blocker) {
          seen.add('blocker');
          expect(op.blocker.key).toBe(Math.max(...keys));
          expect(op.blocker.ms).toBeLessThan(op.blocker.ttl);
        }
        if (op.watch) {
          seen.add(`watch/${op.watch.key === 0 ? 'first' : 'other'}`);
          // A key the acquisition takes before its last one.
          expect(keys).toContain(op.watch.key);
          expect(op.watch.key).toBeLessThan(Math.max(...keys));
        }
        if (op.close) {
          seen.add('close');
          expect(op.blocker).toBeDefined();
          expect(op.wait).toBeGreaterThan(0);
        }
        for (const s of op.steps) if (s.s === 'rmw') expect([s.key, op.purpose]).toEqual([0, 'correctness']);
      }
      // The other streams do not see it.
      for (const control of ['nolock', 'unfenced'] as const) expect(generatePlan({ ...params, seed, control }).edge).toBeUndefined();
    }
    for (const s of ['stepdown', 'stepdown/rival', 'stepdown/work-rmw', 'blocker', 'watch/first', 'watch/other', 'close', 'multi/redis']) expect(seen).toContain(s);
    for (const b of ['postgres', 'mysql', 'zookeeper', 'efficiency', 'correctness']) for (const kind of ['acquire', 'try', 'using']) expect(seen).toContain(`multi/${b}/${kind}`);
  });

  it('moves PostgreSQL locks to MySQL per top-level operation, from streams of their own, and adds MySQL faults after the others', () => {
    let moved = 0;
    let kept = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const plan = generatePlan({ ...params, seed });
      // A decorated call keeps its declaration's backend (the catalog is never moved); so does the semaphore.
      for (const spec of plan.decorated) expect([spec.backend, spec.backend2]).not.toContain('mysql');
      expect(plan.primitives!.sem.backend).not.toBe('mysql');
      // A top-level operation moves whole: its SQL locks are all PostgreSQL or all MySQL (decorated
      // calls and the leader name, which moves seed-wide, apart).
      const sqlOf = (op: LockOp, out: Set<string>): Set<string> => {
        if (op.kind !== 'decorated' && op.ns !== 'leader' && (op.backend === 'postgres' || op.backend === 'mysql')) out.add(op.backend);
        for (const s of op.steps) if (s.s === 'nest') sqlOf(s.op, out);
        return out;
      };
      for (const op of plan.fibers.flat(2)) {
        if (op.kind === 'sleep' || op.kind === 'force') continue;
        const sql = sqlOf(op, new Set());
        expect(sql.size).toBeLessThanOrEqual(1);
        if (sql.has('mysql')) moved += 1;
        if (sql.has('postgres')) kept += 1;
        if (op.ns === 'leader') expect(op.backend).toBe(plan.primitives!.leader.backend);
      }
      // MySQL's faults come after the others in the schedule's indices, each in the run, and the
      // schedule is in time order.
      const mine = plan.faults.filter((f) => f.kind.startsWith('my-') || ((f.kind === 'delay' || f.kind === 'blackhole') && f.targets.includes('mysql')));
      const others = plan.faults.filter((f) => !mine.includes(f));
      for (const f of mine) for (const o of others) expect(f.index).toBeGreaterThan(o.index);
      expect(plan.faults.map((f) => f.at)).toEqual([...plan.faults.map((f) => f.at)].sort((a, b) => a - b));
      // One fault per resource at a time (mariadbd's, and a worker's network with the others').
      for (const f of mine) {
        const resource = f.kind.startsWith('my-') ? 'mysql' : `net${'worker' in f ? f.worker : ''}`;
        for (const o of plan.faults) {
          if (o === f) continue;
          const same = resource === 'mysql' ? o.kind.startsWith('my-') : (o.kind === 'delay' || o.kind === 'blackhole') && `net${o.worker}` === resource;
          if (same) expect(o.at >= f.at + f.dur || f.at >= o.at + o.dur).toBe(true);
        }
      }
    }
    expect(moved).toBeGreaterThan(50);
    expect(kept).toBeGreaterThan(50);
  });

  it('inserts MySqlTransactionLock holders between a fiber\'s own operations, from streams of their own, on the keys of the set (none in the controls)', () => {
    const seen = new Set<string>();
    let xacts = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const plan = generatePlan({ ...params, seed });
      plan.fibers.forEach((fibers, w) =>
        fibers.forEach((ops, f) => {
          const own = f < params.fibers;
          for (const op of ops) {
            if (op.kind !== 'xact') continue;
            // Only in a worker's own fibers (not the operator's, not the edge fiber).
            expect(own).toBe(true);
            xacts += 1;
            expect([op.backend, op.purpose, op.steps, op.ttl]).toEqual(['mysql', 'correctness', [], 0]);
            expect(op.key >= 0 && op.key < plan.keys).toBe(true);
            const x = op.xact!;
            seen.add(`${x.isolation}/${x.end}${x.write ? '' : '/read-only'}`);
            seen.add(`wait/${op.wait > 0 ? 'some' : 'none'}`);
            if (x.holdMs > 0) seen.add('hold');
            if (x.endAfterMs > 0) seen.add('end-after');
            void w;
          }
        }),
      );
      // The operations around them are the ones drawn before (plans of seeds 1–200 compared with the
      // plan before transactions were added: equal once the transactions are taken out).
      for (const control of ['nolock', 'unfenced'] as const) expect(JSON.stringify(generatePlan({ ...params, seed, control }).fibers)).not.toContain('xact');
    }
    expect(xacts).toBeGreaterThan(200);
    for (const isolation of ['repeatable-read', 'read-committed']) for (const end of ['commit', 'rollback', 'destroy']) expect(seen).toContain(`${isolation}/${end}`);
    for (const s of ['wait/some', 'wait/none', 'hold', 'end-after', 'repeatable-read/commit/read-only']) expect(seen).toContain(s);
  });

  it('names the exact replay command, with every non-default parameter', () => {
    expect(replayCommand(params)).toBe('npm run test:simulation -- --seed 42');
    expect(replayCommand({ ...params, durationMs: 20_000, control: 'nolock', faultFilter: [1, 3] })).toBe(
      'npm run test:simulation -- --seed 42 --duration 20000 --control nolock --faults 1,3',
    );
  });
});
