import { believedValid, check, type CheckInput, type Violation } from './checker.js';
import type { SimEvent, SimEventBody } from './protocol.js';

/** The checker must be able to fail: synthetic logs with each kind of violation, and clean ones that must pass. */

const T = 1_000_000; // an arbitrary wall-clock origin
const ev = (t: number, w: number, body: SimEventBody, inc = 0): SimEvent => ({ ...body, t: T + t, w, inc }) as SimEvent;

/**
 * A correctness lease on key 0: requested, granted (valid `validMs`), released at `relAt` (unless
 * undefined). On the routed backends an efficiency lease has no token; on PostgreSQL, MySQL and
 * ZooKeeper every lease has one; on Redlock none has.
 */
function lease(
  w: number,
  id: string,
  token: string,
  reqAt: number,
  grantAt: number,
  validMs: number,
  relAt?: number,
  purpose: 'correctness' | 'efficiency' = 'correctness',
  backend?: 'postgres' | 'mysql' | 'zookeeper' | 'redlock',
): SimEvent[] {
  const tokened = purpose === 'correctness' || backend === 'postgres' || backend === 'mysql' || backend === 'zookeeper';
  const out = [
    ev(reqAt, w, { ev: 'req', id, key: 0, purpose, backend, kind: 'acquire', ttl: validMs, wait: 1000 }),
    ev(grantAt, w, { ev: 'grant', id, key: 0, purpose, backend, token: tokened ? token : undefined, V: T + grantAt + validMs, reentrant: false, root: id }),
  ];
  if (relAt !== undefined) out.push(ev(relAt, w, { ev: 'rel', id }), ev(relAt + 1, w, { ev: 'rel-done', id, ok: true }));
  return out;
}

const write = (t: number, w: number, id: string, el: string, token: string, result: 'ok' | 'stale' | 'unknown' | 'refused' = 'ok', store: 'etcd' | 'postgres' | 'mysql' | 'zookeeper' = 'etcd'): SimEvent =>
  ev(t, w, { ev: 'write', id, store, key: 0, el, token, result });
const pgLease = (w: number, id: string, token: string, reqAt: number, grantAt: number, validMs: number, relAt: number | undefined, purpose: 'correctness' | 'efficiency'): SimEvent[] =>
  lease(w, id, token, reqAt, grantAt, validMs, relAt, purpose, 'postgres');

function input(events: SimEvent[], overrides: Partial<CheckInput> = {}): CheckInput {
  return {
    events,
    registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['b', '20']] }],
    probes: [
      { key: 0, purpose: 'correctness', ok: true, elapsedMs: 900 },
      { key: 0, purpose: 'efficiency', ok: true, elapsedMs: 900 },
    ],
    livenessBoundMs: { 'correctness:0': 5_000, 'efficiency:0': 5_000 },
    workers: [
      { w: 1, inc: 0, how: 'exit', drained: true, exitCode: 0, signal: null },
      { w: 2, inc: 0, how: 'exit', drained: true, exitCode: 0, signal: null },
    ],
    toleranceMs: 1,
    keys: 1,
    ...overrides,
  };
}

const clean: SimEvent[] = [
  ev(-10, 1, { ev: 'sizes', phase: 'baseline', sizes: { 'service.held': 0, 'redis.busyKeyCache': 1 }, settledMs: 0 }),
  ...lease(1, 'A', '10', 0, 5, 1_000, 200),
  write(100, 1, 'A', 'a', '10'),
  ...lease(2, 'B', '20', 150, 210, 1_000, 400),
  write(300, 2, 'B', 'b', '20'),
  ev(500, 1, { ev: 'sizes', phase: 'final', sizes: { 'service.held': 0, 'redis.busyKeyCache': 2 }, settledMs: 10 }),
  ev(600, 1, { ev: 'exit-resources', leaked: [] }),
];

const kinds = (violations: Violation[]): string[] => violations.map((v) => `${v.invariant}:${v.kind}`);

describe('simulation checker', () => {
  it('finds nothing wrong in a clean log', () => {
    const r = check(input(clean));
    expect(r.violations).toEqual([]);
    expect(r.stats).toMatchObject({ ops: 2, grants: 2, writes: { ok: 2 } });
    expect(r.intervals.map((i) => [i.id, i.end - T])).toEqual([
      ['A', 200],
      ['B', 400],
    ]);
  });

  describe('invariant 1: one unended lease with time left per lock', () => {
    it('reports two holders valid at once', () => {
      const events = [...lease(1, 'A', '10', 0, 5, 1_000), ...lease(2, 'B', '20', 100, 500, 1_000, 900)];
      const r = check(input(events, { registers: [] }));
      expect(kinds(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].detail).toMatch(/400\.0 ms of overlap/);
    });

    it('ends a paused holder at its validity, not when it learns of the loss', () => {
      // A is valid until 1005 and is paused; B gets the key at 1100; A hears of the loss at 3000.
      const events = [...lease(1, 'A', '10', 0, 5, 1_000), ...lease(2, 'B', '20', 100, 1_100, 1_000, 1_500), ev(3_000, 1, { ev: 'lost', id: 'A', reason: 'expired' })];
      expect(check(input(events, { registers: [] })).violations).toEqual([]);
      // …but a holder that was *told* it had time left past B's grant is an overlap.
      const told = [...events, ev(1_000, 1, { ev: 'sample', id: 'A', V: T + 1_200 })];
      expect(kinds(check(input(told.sort((a, b) => a.t - b.t), { registers: [] })).violations)).toEqual(['1:overlap']);
    });

    it('follows extend(): a shorter ttl replaces the longer claim, a longer one prolongs it', () => {
      const shortened = [...lease(1, 'A', '10', 0, 5, 1_000), ev(100, 1, { ev: 'ext-ok', id: 'A', ttl: 200, V: T + 300 }), ...lease(2, 'B', '20', 310, 320, 1_000, 900)];
      expect(check(input(shortened, { registers: [] })).violations).toEqual([]);
      const prolonged = [...lease(1, 'A', '10', 0, 5, 1_000), ev(900, 1, { ev: 'ext-ok', id: 'A', ttl: 1_000, V: T + 1_900 }), ...lease(2, 'B', '20', 1_000, 1_500, 1_000, 1_800)];
      expect(kinds(check(input(prolonged, { registers: [] })).violations)).toEqual(['1:overlap']);
    });

    it('does not count a released or aborted lease, nor a tiny clock difference', () => {
      const released = [...lease(1, 'A', '10', 0, 5, 1_000, 100), ...lease(2, 'B', '20', 50, 100.5, 1_000, 900)];
      expect(check(input(released, { registers: [] })).violations).toEqual([]);
      const aborted = [...lease(1, 'A', '10', 0, 5, 1_000), ev(90, 1, { ev: 'lost', id: 'A', reason: 'session-lost' }), ...lease(2, 'B', '20', 50, 95, 1_000, 900)];
      expect(check(input(aborted, { registers: [] })).violations).toEqual([]);
    });

    it('checks efficiency leases too (no tokens there)', () => {
      const events = [...lease(1, 'A', '', 0, 5, 1_000, undefined, 'efficiency'), ...lease(2, 'B', '', 100, 500, 1_000, 900, 'efficiency')];
      expect(kinds(check(input(events, { registers: [] })).violations)).toEqual(['1:overlap']);
    });

    it('reports a reentrant handle granted on an ended lease, and one with another token', () => {
      const events = [
        ...lease(1, 'A', '10', 0, 5, 1_000),
        ev(50, 1, { ev: 'lost', id: 'A', reason: 'expired' }),
        ev(60, 1, { ev: 'grant', id: 'A2', key: 0, purpose: 'correctness', token: '11', V: T + 900, reentrant: true, root: 'A' }),
      ];
      expect(kinds(check(input(events, { registers: [] })).violations)).toEqual(['1:reentrant-after-end', '3:reentrant-token']);
    });

    it('reports a decorated body that ran without its lock', () => {
      const events = [...lease(1, 'A', '10', 0, 5, 1_000), ev(60, 2, { ev: 'unlocked', id: 'B', detail: 'no held lease on k0' })];
      expect(kinds(check(input(events, { registers: [] })).violations)).toEqual(['1:ran-unlocked']);
    });
  });

  describe('invariant 2: fenced registers', () => {
    it('reports an acknowledged element missing from the final value (lost update)', () => {
      const r = check(input(clean, { registers: [{ store: 'etcd', key: 0, list: [['b', '20']] }] }));
      expect(kinds(r.violations)).toEqual(['2:lost-update']);
    });

    it('reports a write told "stale" or "refused" whose element is in the value anyway', () => {
      const events = [...clean, write(450, 1, 'A', 'c', '10', 'stale')];
      const r = check(input(events, { registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['b', '20'], ['c', '10']] }] }));
      expect(kinds(r.violations)).toEqual(['2:refused-write-applied', '2:stale-accepted']);
    });

    it('reports a token lower than an earlier accepted one (stale write accepted)', () => {
      const r = check(input(clean, { registers: [{ store: 'etcd', key: 0, list: [['b', '20'], ['a', '10']] }] }));
      expect(kinds(r.violations)).toEqual(['2:stale-accepted']);
    });

    it('reports duplicates and elements nobody wrote; accepts an unknown write either way', () => {
      const dup = check(input(clean, { registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['a', '10'], ['b', '20'], ['zz', '20']] }] }));
      expect(kinds(dup.violations)).toEqual(['2:duplicate-element', '2:unknown-element']);
      const unknown = [...clean, write(450, 2, 'B', 'u', '20', 'unknown')];
      expect(check(input(unknown)).violations).toEqual([]);
      expect(check(input(unknown, { registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['b', '20'], ['u', '20']] }] })).violations).toEqual([]);
    });

    it('counts a write whose worker died before the answer as of unknown outcome', () => {
      const started = [...clean, ev(450, 2, { ev: 'write-start', id: 'B', store: 'etcd', key: 0, el: 'x', token: '20' })];
      const withIt = { registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['b', '20'], ['x', '20']] as Array<[string, string]> }] };
      expect(check(input(started, withIt)).violations).toEqual([]);
      expect(check(input(started)).violations).toEqual([]);
      expect(kinds(check(input(clean, withIt)).violations)).toEqual(['2:unknown-element']);
    });

    it('needs the final value of every register written', () => {
      expect(kinds(check(input(clean, { registers: [] })).violations)).toEqual(['2:register-unread']);
    });
  });

  describe('invariant 3: fencing tokens', () => {
    it('reports a token not above one received before the request (regression) and a duplicate', () => {
      const regression = [...lease(1, 'A', '20', 0, 5, 100, 50), ...lease(2, 'B', '10', 60, 70, 100, 150)];
      expect(kinds(check(input(regression, { registers: [] })).violations)).toEqual(['3:token-regression']);
      const duplicate = [...lease(1, 'A', '10', 0, 5, 100, 50), ...lease(2, 'B', '10', 60, 70, 100, 150)];
      expect(kinds(check(input(duplicate, { registers: [] })).violations)).toEqual(['3:duplicate-token', '3:token-regression']);
    });

    it('does not order concurrent requests, and requires a token on correctness leases', () => {
      // B asked before A's grant was received: either order is possible.
      const concurrent = [...lease(1, 'A', '20', 0, 50, 100, 60), ...lease(2, 'B', '10', 10, 70, 100, 150)];
      expect(check(input(concurrent, { registers: [] })).violations).toEqual([]);
      const missing = [ev(0, 1, { ev: 'req', id: 'A', key: 0, purpose: 'correctness', kind: 'try', ttl: 100, wait: 0 }), ev(1, 1, { ev: 'grant', id: 'A', key: 0, purpose: 'correctness', V: T + 90, reentrant: false, root: 'A' })];
      expect(kinds(check(input(missing, { registers: [] })).violations)).toEqual(['3:missing-token']);
    });
  });

  describe('invariant 4: liveness', () => {
    it('reports a lock a fresh instance cannot get, or gets too late', () => {
      const stuck = check(input(clean, { probes: [{ key: 0, purpose: 'correctness', ok: false, elapsedMs: 9_000, message: 'LockBusyError' }] }));
      expect(kinds(stuck.violations)).toEqual(['4:stuck']);
      const late = check(input(clean, { probes: [{ key: 0, purpose: 'correctness', ok: true, elapsedMs: 7_000 }] }));
      expect(kinds(late.violations)).toEqual(['4:held-too-long']);
      expect(kinds(check(input(clean, { probes: undefined })).violations)).toEqual(['4:probe-missing']);
    });

    it('reports a worker whose calls did not finish, but not a crashed one', () => {
      const workers = [
        { w: 1, inc: 0, how: 'exit' as const, drained: false, exitCode: null, signal: 'SIGKILL' },
        { w: 2, inc: 0, how: 'crashed' as const, drained: false, exitCode: null, signal: 'SIGKILL' },
      ];
      expect(kinds(check(input(clean, { workers })).violations)).toEqual(['4:hung']);
    });

    it('reports a worker that exited by itself before it drained (an uncaught exception) as died, not hung', () => {
      const workers = [{ w: 0, inc: 0, how: 'exit' as const, drained: false, exitCode: 1, signal: null, stderr: 'Error: boom\n    at step (sim-worker.js:1:1)\n' }];
      const r = check(input(clean, { workers }));
      expect(kinds(r.violations)).toEqual(['4:died']);
      // What the worker said is in the report itself, not only somewhere in the run's output.
      expect(r.violations[0].detail).toMatch(/w0\.0 exited by itself \(code 1\) .* its stderr ended: Error: boom\n {4}at step/s);
      const silent = check(input(clean, { workers: [{ ...workers[0], stderr: '' }] }));
      expect(silent.violations[0].detail).toMatch(/it wrote nothing to stderr/);
    });
  });

  describe('invariant 5: nothing grows without bound', () => {
    it('reports a collection above its baseline once nothing is held, allowing per-key caches', () => {
      const grown = clean.map((e) => (e.ev === 'sizes' && e.phase === 'final' ? { ...e, sizes: { 'service.held': 3, 'redis.busyKeyCache': 3 } } : e));
      const r = check(input(grown));
      expect(kinds(r.violations)).toEqual(['5:grown']);
      expect(r.violations[0].lock).toBe('service.held');
    });

    it('reports handles left after app.close() and a process kept alive', () => {
      const leaked = clean.map((e) => (e.ev === 'exit-resources' ? { ...e, leaked: ['TCPSocketWrap', 'Timeout'] } : e));
      expect(kinds(check(input(leaked)).violations)).toEqual(['5:leaked-handles']);
      const workers = [{ w: 1, inc: 0, how: 'exit' as const, drained: true, exitCode: 3, signal: null }];
      expect(kinds(check(input(clean, { workers })).violations)).toEqual(['5:kept-alive']);
    });
  });

  describe('PostgreSQL: one lock per key whatever the purpose, its own register', () => {
    const pgProbes = [...input([]).probes!, { key: 0, purpose: 'correctness' as const, backend: 'postgres' as const, ok: true, elapsedMs: 900 }];
    const pgInput = (events: SimEvent[], overrides: Partial<CheckInput> = {}): CheckInput =>
      input(events, { registers: [], probes: pgProbes, livenessBoundMs: { ...input([]).livenessBoundMs, 'postgres:0': 5_000 }, ...overrides });

    it('reports an efficiency and a correctness lease of one key valid at once (one lease row), but not across backends', () => {
      const both = [...pgLease(1, 'A', '10', 0, 5, 1_000, undefined, 'efficiency'), ...pgLease(2, 'B', '20', 100, 500, 1_000, 900, 'correctness')];
      const r = check(pgInput(both));
      expect(kinds(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('postgres:0');
      expect(r.stats.postgres.grants).toBe(2);
      // The same two leases on the routed backends are two locks (efficiency: Redis, correctness: etcd)…
      const routed = [...lease(1, 'A', '', 0, 5, 1_000, undefined, 'efficiency'), ...lease(2, 'B', '20', 100, 500, 1_000, 900)];
      expect(check(input(routed, { registers: [] })).violations).toEqual([]);
      // …and a routed lease does not exclude a PostgreSQL one on key 0.
      const mixed = [...lease(1, 'A', '10', 0, 5, 1_000), ...pgLease(2, 'B', '20', 100, 500, 1_000, 900, 'correctness')];
      expect(check(pgInput(mixed)).violations).toEqual([]);
    });

    it('checks its tokens across both purposes: unique and growing', () => {
      const regression = [...pgLease(1, 'A', '20', 0, 5, 100, 50, 'correctness'), ...pgLease(2, 'B', '10', 60, 70, 100, 150, 'efficiency')];
      expect(kinds(check(pgInput(regression)).violations)).toEqual(['3:token-regression']);
      const duplicate = [...pgLease(1, 'A', '10', 0, 5, 100, 50, 'efficiency'), ...pgLease(2, 'B', '10', 60, 70, 100, 150, 'efficiency')];
      expect(kinds(check(pgInput(duplicate)).violations)).toEqual(['3:duplicate-token', '3:token-regression']);
      const growing = [...pgLease(1, 'A', '10', 0, 5, 100, 50, 'efficiency'), ...pgLease(2, 'B', '11', 60, 70, 100, 150, 'correctness')];
      expect(check(pgInput(growing)).violations).toEqual([]);
    });

    it('checks the PgFence register: a stale write accepted, an acknowledged one lost, a refused one applied', () => {
      const events = [
        ...pgLease(1, 'A', '10', 0, 5, 1_000, 200, 'correctness'),
        write(100, 1, 'A', 'a', '10', 'ok', 'postgres'),
        ...pgLease(2, 'B', '20', 150, 210, 1_000, 400, 'correctness'),
        write(300, 2, 'B', 'b', '20', 'ok', 'postgres'),
        write(350, 1, 'A', 'c', '10', 'stale', 'postgres'),
      ];
      const pgReg = (list: Array<[string, string]>) => ({ registers: [{ store: 'postgres', key: 0, list }] });
      const ok = check(pgInput(events, pgReg([['a', '10'], ['b', '20']])));
      expect(ok.violations).toEqual([]);
      expect(ok.stats.postgres.writes).toEqual({ ok: 2, stale: 1 });
      expect(kinds(check(pgInput(events, pgReg([['b', '20'], ['a', '10']]))).violations)).toEqual(['2:stale-accepted']);
      expect(kinds(check(pgInput(events, pgReg([['b', '20']]))).violations)).toEqual(['2:lost-update']);
      expect(kinds(check(pgInput(events, pgReg([['a', '10'], ['b', '20'], ['c', '10']]))).violations)).toEqual(['2:refused-write-applied', '2:stale-accepted']);
      // The etcd register of key 0 is another register: its final value does not stand in.
      expect(kinds(check(pgInput(events, { registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['b', '20']] }] })).violations)).toEqual(['2:register-unread']);
    });

    it('needs a probe of each PostgreSQL key used, within its bound', () => {
      const events = pgLease(1, 'A', '10', 0, 5, 1_000, 200, 'efficiency');
      expect(check(pgInput(events)).violations).toEqual([]);
      // The routed probes do not answer for it.
      expect(kinds(check(pgInput(events, { probes: input([]).probes })).violations)).toEqual(['4:probe-missing']);
      const late = pgProbes.map((p) => (p.backend ? { ...p, elapsedMs: 6_000 } : p));
      expect(kinds(check(pgInput(events, { probes: late })).violations)).toEqual(['4:held-too-long']);
      const stuck = pgProbes.map((p) => (p.backend ? { ...p, ok: false, message: 'LockBusyError' } : p));
      expect(kinds(check(pgInput(events, { probes: stuck })).violations)).toEqual(['4:stuck']);
    });

    it("reports the backend's waiters left behind, allowing its per-key busy cache", () => {
      const sizes = (s: Record<string, number>, phase: 'baseline' | 'final'): SimEvent => ev(phase === 'baseline' ? -10 : 500, 1, { ev: 'sizes', phase, sizes: s, settledMs: 10 });
      const base = { 'postgres.waiters': 0, 'postgres.busyKeyCache': 1 };
      const log = (final: Record<string, number>): SimEvent[] => [sizes(base, 'baseline'), ...clean.filter((e) => e.ev !== 'sizes'), sizes(final, 'final')];
      expect(check(input(log({ 'postgres.waiters': 0, 'postgres.busyKeyCache': 3 }))).violations).toEqual([]);
      const leaked = check(input(log({ 'postgres.waiters': 2, 'postgres.busyKeyCache': 1 })));
      expect(kinds(leaked.violations)).toEqual(['5:grown']);
      expect(leaked.violations[0].lock).toBe('postgres.waiters');
    });
  });

  describe('MySQL: one lock per key whatever the purpose, its own register, apart from PostgreSQL', () => {
    const myLease = (w: number, id: string, token: string, reqAt: number, grantAt: number, validMs: number, relAt: number | undefined, purpose: 'correctness' | 'efficiency'): SimEvent[] =>
      lease(w, id, token, reqAt, grantAt, validMs, relAt, purpose, 'mysql');
    const myProbes = [...input([]).probes!, { key: 0, purpose: 'correctness' as const, backend: 'mysql' as const, ok: true, elapsedMs: 900 }];
    const myInput = (events: SimEvent[], overrides: Partial<CheckInput> = {}): CheckInput =>
      input(events, { registers: [], probes: myProbes, livenessBoundMs: { ...input([]).livenessBoundMs, 'mysql:0': 5_000 }, ...overrides });

    it('reports both purposes of one key valid at once (one lease row); a PostgreSQL lease on key 0 is another lock', () => {
      const both = [...myLease(1, 'A', '10', 0, 5, 1_000, undefined, 'efficiency'), ...myLease(2, 'B', '20', 100, 500, 1_000, 900, 'correctness')];
      const r = check(myInput(both));
      expect(kinds(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('mysql:0');
      expect(r.stats.mysql.grants).toBe(2);
      expect(r.stats.postgres.grants).toBe(0);
      const pgProbe = { key: 0, purpose: 'correctness' as const, backend: 'postgres' as const, ok: true, elapsedMs: 900 };
      const mixed = [...myLease(1, 'A', '10', 0, 5, 1_000, undefined, 'efficiency'), ...pgLease(2, 'B', '5', 100, 500, 1_000, 900, 'correctness')];
      expect(check(myInput(mixed, { probes: [...myProbes, pgProbe], livenessBoundMs: { ...input([]).livenessBoundMs, 'mysql:0': 5_000, 'postgres:0': 5_000 } })).violations).toEqual([]);
    });

    it('checks its tokens across both purposes, as one sequence of its own (across a server restart too)', () => {
      const regression = [...myLease(1, 'A', '20', 0, 5, 100, 50, 'correctness'), ...myLease(2, 'B', '10', 60, 70, 100, 150, 'efficiency')];
      expect(kinds(check(myInput(regression)).violations)).toEqual(['3:token-regression']);
      const duplicate = [...myLease(1, 'A', '10', 0, 5, 100, 50, 'efficiency'), ...myLease(2, 'B', '10', 60, 70, 100, 150, 'correctness')];
      expect(kinds(check(myInput(duplicate)).violations)).toEqual(['3:duplicate-token', '3:token-regression']);
      const growing = [...myLease(1, 'A', '10', 0, 5, 100, 50, 'efficiency'), ...myLease(2, 'B', '11', 60, 70, 100, 150, 'correctness')];
      expect(check(myInput(growing)).violations).toEqual([]);
    });

    it('checks the MySqlFence register apart from the PgFence one, and needs its own probe', () => {
      const events = [
        ...myLease(1, 'A', '10', 0, 5, 1_000, 200, 'correctness'),
        write(100, 1, 'A', 'a', '10', 'ok', 'mysql'),
        ...myLease(2, 'B', '20', 150, 210, 1_000, 400, 'correctness'),
        write(300, 2, 'B', 'b', '20', 'ok', 'mysql'),
        write(350, 1, 'A', 'c', '10', 'stale', 'mysql'),
      ];
      const myReg = (list: Array<[string, string]>, store = 'mysql') => ({ registers: [{ store, key: 0, list }] });
      const ok = check(myInput(events, myReg([['a', '10'], ['b', '20']])));
      expect(ok.violations).toEqual([]);
      expect(ok.stats.mysql.writes).toEqual({ ok: 2, stale: 1 });
      expect(kinds(check(myInput(events, myReg([['b', '20'], ['a', '10']]))).violations)).toEqual(['2:stale-accepted']);
      expect(kinds(check(myInput(events, myReg([['a', '10'], ['b', '20'], ['c', '10']]))).violations)).toEqual(['2:refused-write-applied', '2:stale-accepted']);
      expect(kinds(check(myInput(events, myReg([['a', '10'], ['b', '20']], 'postgres'))).violations)).toEqual(['2:register-unread']);
      expect(kinds(check(myInput(events, { registers: myReg([['a', '10'], ['b', '20']]).registers, probes: input([]).probes })).violations)).toEqual(['4:probe-missing']);
    });
  });

  describe('MySQL transaction holders (MySqlTransactionLock): a holder of the key like a lease, no ttl', () => {
    const myLease = (w: number, id: string, token: string, reqAt: number, grantAt: number, validMs: number, relAt: number | undefined): SimEvent[] =>
      lease(w, id, token, reqAt, grantAt, validMs, relAt, 'correctness', 'mysql');
    /** A transaction on key 0: requested, granted with `token`, ended (`how`) at `endAt` unless undefined. */
    const xact = (w: number, id: string, token: string, reqAt: number, grantAt: number, endAt?: number, how = 'commit'): SimEvent[] => {
      const out = [
        ev(reqAt, w, { ev: 'req', id, key: 0, purpose: 'correctness', backend: 'mysql', kind: 'xact', ttl: 0, wait: 1000 }),
        ev(grantAt, w, { ev: 'grant', id, key: 0, purpose: 'correctness', backend: 'mysql', token, reentrant: false, root: id, xact: true }),
      ];
      if (endAt !== undefined) out.push(ev(endAt, w, { ev: 'rel', id, how }), ev(endAt + 1, w, { ev: 'rel-done', id, ok: true }));
      return out;
    };
    const myProbes = [...input([]).probes!, { key: 0, purpose: 'correctness' as const, backend: 'mysql' as const, ok: true, elapsedMs: 900 }];
    const myInput = (events: SimEvent[], overrides: Partial<CheckInput> = {}): CheckInput =>
      input(sorted(events), { registers: [], probes: myProbes, livenessBoundMs: { ...input([]).livenessBoundMs, 'mysql:0': 5_000 }, ...overrides });

    it('holds until its COMMIT / ROLLBACK is sent, however long: a lease or another transaction before then overlaps it', () => {
      // A transaction held 5 s (no ttl), then a lease; a transaction after a lease ran out.
      const fine = [...xact(1, 'X', '10', 0, 5, 5_000), ...myLease(2, 'A', '11', 100, 5_010, 200, 5_100), ...xact(1, 'Y', '12', 5_150, 5_400, 5_600, 'rollback')];
      const ok = check(myInput(fine));
      expect(ok.violations).toEqual([]);
      expect(ok.stats.mysql).toMatchObject({ grants: 3, xact: { calls: 2, grants: 2, ends: { commit: 1, rollback: 1 } } });
      expect(ok.intervals.filter((i) => i.xact).map((i) => [i.id, i.end - T])).toEqual([
        ['X', 5_000],
        ['Y', 5_600],
      ]);
      // A lease granted while the transaction still holds (no ttl ran out: it never had one).
      expect(kinds(check(myInput([...xact(1, 'X', '10', 0, 5, 5_000), ...myLease(2, 'A', '11', 100, 3_000, 200, 3_100)])).violations)).toEqual(['1:overlap']);
      // Two transactions at once; one never ended (its worker exited without a word) overlaps everything after it.
      expect(kinds(check(myInput([...xact(1, 'X', '10', 0, 5, 500), ...xact(2, 'Y', '11', 100, 400, 600, 'destroy')])).violations)).toEqual(['1:overlap']);
      expect(kinds(check(myInput([...xact(1, 'X', '10', 0, 5), ...myLease(2, 'A', '11', 100, 9_000, 200, 9_100)])).violations)).toEqual(['1:overlap']);
    });

    it('ends at a session end without its say (the server killed, sessions KILLed, its worker killed) and at a failed statement', () => {
      const after = [...xact(1, 'X', '10', 0, 5), ...myLease(2, 'A', '11', 100, 3_000, 200, 3_100)];
      expect(check(myInput(after, { sessionEnds: [{ at: T + 2_000, why: 'KILL of every mariadb session' }] })).violations).toEqual([]);
      expect(check(myInput(after, { sessionEnds: [{ at: T + 2_000, w: 1, why: 'kill -9 w1' }] })).stats.mysql.xact).toMatchObject({ ends: {}, cut: 1 });
      // Another worker's crash, or a session end after the lease's grant, does not end it.
      expect(kinds(check(myInput(after, { sessionEnds: [{ at: T + 2_000, w: 2, why: 'kill -9 w2' }] })).violations)).toEqual(['1:overlap']);
      expect(kinds(check(myInput(after, { sessionEnds: [{ at: T + 3_050, why: 'restart' }] })).violations)).toEqual(['1:overlap']);
      // Sessions KILLed one by one from 0 to 10: granted at 5, it may have lost its session at once.
      expect(check(myInput(after, { sessionEnds: [{ at: T, until: T + 10, why: 'KILL of every mariadb session' }] })).violations).toEqual([]);
      expect(kinds(check(myInput(after, { sessionEnds: [{ at: T, until: T + 4, why: 'KILL of every mariadb session' }] })).violations)).toEqual(['1:overlap']);
      // A statement that failed: from when it was sent.
      const failed = [...after, ev(3_200, 1, { ev: 'lost', id: 'X', reason: 'xact write: Error', since: T + 2_900 })];
      expect(check(myInput(failed)).violations).toEqual([]);
      const late = [...after, ev(3_200, 1, { ev: 'lost', id: 'X', reason: 'xact write: Error', since: T + 3_050 })];
      expect(kinds(check(myInput(late)).violations)).toEqual(['1:overlap']);
    });

    it('orders its token with the leases: above every grant received before it was requested, and unique', () => {
      expect(kinds(check(myInput([...myLease(1, 'A', '20', 0, 5, 100, 50), ...xact(2, 'X', '10', 60, 70, 150)])).violations)).toEqual(['3:token-regression']);
      expect(kinds(check(myInput([...xact(1, 'X', '20', 0, 5, 50), ...myLease(2, 'A', '15', 60, 70, 100, 150)])).violations)).toEqual(['3:token-regression']);
      expect(kinds(check(myInput([...xact(1, 'X', '10', 0, 5, 50), ...xact(2, 'Y', '10', 60, 70, 150)])).violations)).toEqual(['3:duplicate-token', '3:token-regression']);
      expect(check(myInput([...xact(1, 'X', '10', 0, 5, 50), ...myLease(2, 'A', '11', 60, 70, 100, 150), ...xact(1, 'Y', '12', 160, 170, 250)])).violations).toEqual([]);
    });

    it('finds a write it did not commit in the register (rolled back, its connection closed), and is never ended by forceRelease() nor owed to list()', () => {
      const events = [
        ...xact(1, 'X', '10', 0, 5, 200),
        write(100, 1, 'X', 'a', '10', 'ok', 'mysql'),
        ...xact(2, 'Y', '11', 150, 210, 400, 'rollback'),
        ev(300, 2, { ev: 'write', id: 'Y', store: 'mysql', key: 0, el: 'b', token: '11', result: 'rolledback' }),
      ];
      const reg = (list: Array<[string, string]>) => ({ registers: [{ store: 'mysql', key: 0, list }] });
      expect(check(myInput(events, reg([['a', '10']]))).violations).toEqual([]);
      expect(kinds(check(myInput(events, reg([['a', '10'], ['b', '11']]))).violations)).toEqual(['2:refused-write-applied']);
      // forceRelease() answers that nobody holds it (or fails): the hold goes on; list() does not name it.
      const forced = [
        ...xact(1, 'X', '10', 0, 5, 5_000),
        ev(50, 3, { ev: 'list', id: 'L', key: 0, purpose: 'correctness', backend: 'mysql' }),
        ev(60, 3, { ev: 'list-done', id: 'L', listed: false }),
        ev(100, 3, { ev: 'force', id: 'F', key: 0, purpose: 'correctness', backend: 'mysql' }),
        ev(110, 3, { ev: 'force-done', id: 'F', message: 'timeout' }),
        ...myLease(2, 'A', '11', 150, 3_000, 200, 3_100),
      ];
      expect(kinds(check(myInput(forced)).violations)).toEqual(['1:overlap']);
    });
  });

  describe('ZooKeeper: one lock per key whatever the purpose, its own register, apart from PostgreSQL', () => {
    const zkLease = (w: number, id: string, token: string, reqAt: number, grantAt: number, validMs: number, relAt: number | undefined, purpose: 'correctness' | 'efficiency'): SimEvent[] =>
      lease(w, id, token, reqAt, grantAt, validMs, relAt, purpose, 'zookeeper');
    const zkProbes = [...input([]).probes!, { key: 0, purpose: 'correctness' as const, backend: 'zookeeper' as const, ok: true, elapsedMs: 900 }];
    const zkInput = (events: SimEvent[], overrides: Partial<CheckInput> = {}): CheckInput =>
      input(events, { registers: [], probes: zkProbes, livenessBoundMs: { ...input([]).livenessBoundMs, 'zookeeper:0': 5_000 }, ...overrides });

    it('reports both purposes of one key valid at once; a PostgreSQL or routed lease on key 0 is another lock', () => {
      const both = [...zkLease(1, 'A', '10', 0, 5, 1_000, undefined, 'efficiency'), ...zkLease(2, 'B', '20', 100, 500, 1_000, 900, 'correctness')];
      const r = check(zkInput(both));
      expect(kinds(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('zookeeper:0');
      expect(r.stats.zookeeper.grants).toBe(2);
      expect(r.stats.postgres.grants).toBe(0);
      const pgProbe = { key: 0, purpose: 'correctness' as const, backend: 'postgres' as const, ok: true, elapsedMs: 900 };
      const mixed = [...zkLease(1, 'A', '10', 0, 5, 1_000, undefined, 'correctness'), ...pgLease(2, 'B', '20', 100, 500, 1_000, 900, 'correctness'), ...lease(3, 'C', '30', 100, 500, 1_000, 900)];
      expect(check(zkInput(mixed, { probes: [...zkProbes, pgProbe], livenessBoundMs: { ...zkInput([]).livenessBoundMs, 'postgres:0': 5_000 } })).violations).toEqual([]);
    });

    it('checks its tokens across both purposes, as one sequence of its own', () => {
      const regression = [...zkLease(1, 'A', '20', 0, 5, 100, 50, 'efficiency'), ...zkLease(2, 'B', '10', 60, 70, 100, 150, 'correctness')];
      expect(kinds(check(zkInput(regression)).violations)).toEqual(['3:token-regression']);
      // A smaller token than an earlier PostgreSQL lease's is no regression: another lock.
      const pgProbe = { key: 0, purpose: 'correctness' as const, backend: 'postgres' as const, ok: true, elapsedMs: 900 };
      const across = [...pgLease(1, 'A', '20', 0, 5, 100, 50, 'correctness'), ...zkLease(2, 'B', '10', 60, 70, 100, 150, 'efficiency')];
      expect(check(zkInput(across, { probes: [...zkProbes, pgProbe], livenessBoundMs: { ...zkInput([]).livenessBoundMs, 'postgres:0': 5_000 } })).violations).toEqual([]);
    });

    it('checks its register apart from the etcd one, and needs its own probe', () => {
      const events = [
        ...zkLease(1, 'A', '10', 0, 5, 1_000, 200, 'correctness'),
        write(100, 1, 'A', 'a', '10', 'ok', 'zookeeper'),
        ...zkLease(2, 'B', '20', 150, 210, 1_000, 400, 'correctness'),
        write(300, 2, 'B', 'b', '20', 'ok', 'zookeeper'),
        write(350, 1, 'A', 'c', '10', 'stale', 'zookeeper'),
      ];
      const zkReg = (list: Array<[string, string]>) => ({ registers: [{ store: 'zookeeper', key: 0, list }] });
      const ok = check(zkInput(events, zkReg([['a', '10'], ['b', '20']])));
      expect(ok.violations).toEqual([]);
      expect(ok.stats.zookeeper.writes).toEqual({ ok: 2, stale: 1 });
      expect(kinds(check(zkInput(events, zkReg([['b', '20'], ['a', '10']]))).violations)).toEqual(['2:stale-accepted']);
      expect(kinds(check(zkInput(events, zkReg([['a', '10'], ['b', '20'], ['c', '10']]))).violations)).toEqual(['2:refused-write-applied', '2:stale-accepted']);
      expect(kinds(check(zkInput(events, { registers: [{ store: 'etcd', key: 0, list: [['a', '10'], ['b', '20']] }] })).violations)).toEqual(['2:register-unread']);
      const pgOnly = [...input([]).probes!, { key: 0, purpose: 'correctness' as const, backend: 'postgres' as const, ok: true, elapsedMs: 900 }];
      expect(kinds(check(zkInput(events, { ...zkReg([['a', '10'], ['b', '20']]), probes: pgOnly })).violations)).toEqual(['4:probe-missing']);
    });

    it("reports its nodes, waiters and session holders left behind, allowing its idle-line clock per key", () => {
      const sizes = (s: Record<string, number>, phase: 'baseline' | 'final'): SimEvent => ev(phase === 'baseline' ? -10 : 500, 1, { ev: 'sizes', phase, sizes: s, settledMs: 10 });
      const base = { 'zookeeper.nodes': 0, 'zookeeper.turns': 0, 'zookeeper.sessionHolders': 0, 'zookeeper.lineCache': 1 };
      const log = (final: Record<string, number>): SimEvent[] => [sizes(base, 'baseline'), ...clean.filter((e) => e.ev !== 'sizes'), sizes(final, 'final')];
      expect(check(input(log({ ...base, 'zookeeper.lineCache': 3 }))).violations).toEqual([]);
      for (const leak of ['zookeeper.nodes', 'zookeeper.turns', 'zookeeper.sessionHolders']) {
        const leaked = check(input(log({ ...base, [leak]: 1 })));
        expect(kinds(leaked.violations)).toEqual(['5:grown']);
        expect(leaked.violations[0].lock).toBe(leak);
      }
      // The idle-line clock is per key: more than the seed's keys is a leak too.
      expect(kinds(check(input(log({ ...base, 'zookeeper.lineCache': 4 }))).violations)).toEqual(['5:grown']);
    });
  });

  describe('Redlock: one lock per key, efficiency only, no tokens', () => {
    const rlLease = (w: number, id: string, reqAt: number, grantAt: number, validMs: number, relAt?: number): SimEvent[] =>
      lease(w, id, '', reqAt, grantAt, validMs, relAt, 'efficiency', 'redlock');
    const rlProbes = [...input([]).probes!, { key: 0, purpose: 'efficiency' as const, backend: 'redlock' as const, ok: true, elapsedMs: 900 }];
    const rlInput = (events: SimEvent[], overrides: Partial<CheckInput> = {}): CheckInput =>
      input(events, { registers: [], probes: rlProbes, livenessBoundMs: { ...input([]).livenessBoundMs, 'redlock:0': 4_000 }, ...overrides });

    it('reports two holders valid at once (e.g. a master restarted empty too soon); a routed efficiency lease on key 0 is another lock', () => {
      // B won a majority while A still believed it held: what an immediate empty restart of masters allows.
      const both = [...rlLease(1, 'A', 0, 5, 1_000), ...rlLease(2, 'B', 100, 500, 1_000, 900)];
      const r = check(rlInput(both));
      expect(kinds(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('redlock:0');
      expect(r.violations[0].detail).toMatch(/token -/);
      expect(r.stats.redlock.grants).toBe(2);
      expect(r.stats.zookeeper.grants + r.stats.postgres.grants).toBe(0);
      // One after the other, and beside a Redis (routed efficiency) lease of key 0: no violation.
      const apart = [...rlLease(1, 'A', 0, 5, 1_000, 400), ...rlLease(2, 'B', 100, 410, 1_000, 900), ...lease(3, 'C', '', 100, 200, 1_000, 900, 'efficiency')];
      expect(check(rlInput(apart)).violations).toEqual([]);
    });

    it('asks no token of its leases (efficiency only)', () => {
      const r = check(rlInput([...rlLease(1, 'A', 0, 5, 100, 50), ...rlLease(2, 'B', 60, 70, 100, 150)]));
      expect(r.violations).toEqual([]);
      expect(r.intervals.map((i) => i.token)).toEqual([undefined, undefined]);
    });

    it('needs its own probe, within its bound', () => {
      const events = rlLease(1, 'A', 0, 5, 1_000, 200);
      expect(kinds(check(rlInput(events, { probes: input([]).probes })).violations)).toEqual(['4:probe-missing']);
      const late = rlProbes.map((p) => (p.backend ? { ...p, elapsedMs: 4_500 } : p));
      expect(kinds(check(rlInput(events, { probes: late })).violations)).toEqual(['4:held-too-long']);
    });

    it("reports its waiters, line, holders or a master's waiters left behind", () => {
      const sizes = (s: Record<string, number>, phase: 'baseline' | 'final'): SimEvent => ev(phase === 'baseline' ? -10 : 500, 1, { ev: 'sizes', phase, sizes: s, settledMs: 10 });
      const base = { 'redlock.turns': 0, 'redlock.lines': 0, 'redlock.held': 0, 'redlock.master[2].waiters': 0 };
      const log = (final: Record<string, number>): SimEvent[] => [sizes(base, 'baseline'), ...clean.filter((e) => e.ev !== 'sizes'), sizes(final, 'final')];
      expect(check(input(log(base))).violations).toEqual([]);
      // Per key, yet not a cache: a key's line goes once nobody here waits for it.
      for (const leak of ['redlock.turns', 'redlock.lines', 'redlock.held', 'redlock.master[2].waiters']) {
        const leaked = check(input(log({ ...base, [leak]: 1 })));
        expect(kinds(leaked.violations)).toEqual(['5:grown']);
        expect(leaked.violations[0].lock).toBe(leak);
      }
    });
  });

  it('computes believed-valid segments from claims, losses and releases', () => {
    expect(believedValid({ claims: [{ t: 0, V: 100 }, { t: 50, V: 80 }, { t: 60, V: 200 }] })).toEqual([[0, 200]]);
    expect(believedValid({ claims: [{ t: 0, V: 100 }, { t: 150, V: 300 }], relT: 250 })).toEqual([
      [0, 100],
      [150, 250],
    ]);
    expect(believedValid({ claims: [{ t: 0, V: 100 }], lostT: 40 })).toEqual([[0, 40]]);
    expect(believedValid({ claims: [{ t: 0, V: undefined }] })).toEqual([]);
  });
});

/**
 * A lease of a new primitive: a semaphore holder (ns 'sem', permits), a multi-key lease (keys), a
 * leader term (ns 'leader', kind 'campaign').
 */
function prim(
  w: number,
  id: string,
  token: string | undefined,
  reqAt: number,
  grantAt: number,
  validMs: number,
  relAt: number | undefined,
  extra: { ns?: 'sem' | 'leader'; permits?: number; keys?: number[]; purpose?: 'correctness' | 'efficiency'; kind?: string },
): SimEvent[] {
  const { kind = 'acquire', purpose = 'correctness', ...fields } = extra;
  const key = extra.keys?.[0] ?? 0;
  const out = [
    ev(reqAt, w, { ev: 'req', id, key, purpose, kind, ttl: validMs, wait: 1000, ...fields }),
    ev(grantAt, w, { ev: 'grant', id, key, purpose, token, V: T + grantAt + validMs, reentrant: false, root: id, ...fields }),
  ];
  if (relAt !== undefined) out.push(ev(relAt, w, { ev: 'rel', id }), ev(relAt + 1, w, { ev: 'rel-done', id, ok: true }));
  return out;
}
const sorted = (events: SimEvent[]): SimEvent[] => [...events].sort((a, b) => a.t - b.t);
/** Safety only (the synthetic logs below have no probe answers for their locks). */
const safety = (violations: Violation[]): string[] => kinds(violations).filter((k) => !k.startsWith('4:'));

describe('simulation checker: semaphores, multi-key leases, leaders, forceRelease()', () => {
  describe('semaphores: at most `permits` holders valid at once', () => {
    const sem = { ns: 'sem' as const, permits: 2 };
    it('lets `permits` holders overlap', () => {
      const events = sorted([...prim(1, 'A', '10', 0, 5, 1_000, 600, sem), ...prim(2, 'B', '20', 10, 20, 1_000, 700, sem), ...prim(3, 'C', '30', 30, 650, 1_000, 900, sem)]);
      const r = check(input(events, { registers: [] }));
      expect(safety(r.violations)).toEqual([]);
      expect(r.stats.sem).toEqual({ grants: 3, maxHolders: 2 });
    });

    it('reports a holder too many (over-admission), for as long as it lasts', () => {
      const events = sorted([...prim(1, 'A', '10', 0, 5, 1_000, 600, sem), ...prim(2, 'B', '20', 10, 20, 1_000, 700, sem), ...prim(3, 'C', '30', 30, 500, 1_000, 900, sem)]);
      const r = check(input(events, { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:over-admission']);
      expect(r.violations[0].lock).toBe('sem/correctness:0');
      expect(r.violations[0].detail).toMatch(/3 holders of a semaphore of 2 permits .* for 100\.0 ms/);
      // A permit more, and the same log is fine.
      const three = sorted(events.map((e) => ('permits' in e ? { ...e, permits: 3 } : e)));
      expect(safety(check(input(three, { registers: [] })).violations)).toEqual([]);
    });

    it('ends a semaphore holder at its validity, its loss or its release, like any lease', () => {
      const events = sorted([...prim(1, 'A', '10', 0, 5, 400, undefined, sem), ...prim(2, 'B', '20', 10, 20, 1_000, 900, sem), ...prim(3, 'C', '30', 30, 406, 1_000, 950, sem)]);
      expect(safety(check(input(events, { registers: [] })).violations)).toEqual([]);
    });

    it('checks their tokens: each holder its own, above every token received before it was asked for', () => {
      // (B asked before A's grant came back: only the duplicate.)
      const dup = sorted([...prim(1, 'A', '10', 0, 5, 1_000, 600, sem), ...prim(2, 'B', '10', 3, 20, 1_000, 700, sem)]);
      expect(safety(check(input(dup, { registers: [] })).violations)).toEqual(['3:duplicate-token']);
      const regression = sorted([...prim(1, 'A', '30', 0, 5, 1_000, 600, sem), ...prim(2, 'B', '20', 10, 20, 1_000, 700, sem)]);
      expect(safety(check(input(regression, { registers: [] })).violations)).toEqual(['3:token-regression']);
      // Redis semaphores have none (efficiency): nothing to check.
      const redis = sorted([...prim(1, 'A', undefined, 0, 5, 1_000, 600, { ...sem, purpose: 'efficiency' }), ...prim(2, 'B', undefined, 10, 20, 1_000, 700, { ...sem, purpose: 'efficiency' })]);
      expect(safety(check(input(redis, { registers: [] })).violations)).toEqual([]);
    });
  });

  describe('multi-key leases: a holder of each of its keys', () => {
    it('reports a single-key holder valid while a multi-key lease holds that key, on that key only', () => {
      const events = sorted([...prim(1, 'M', '40', 0, 5, 1_000, 800, { keys: [1, 0] }), ...prim(2, 'S', '50', 10, 300, 1_000, 900, { keys: undefined })]);
      const r = check(input(events, { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('correctness:0');
      // The other key's holder is no conflict.
      const other = sorted([...prim(1, 'M', '40', 0, 5, 1_000, 800, { keys: [1, 2] }), ...prim(2, 'S', '50', 10, 300, 1_000, 900, {})]);
      expect(safety(check(input(other, { registers: [] })).violations)).toEqual([]);
      expect(check(input(other, { registers: [] })).stats.multi.grants).toBe(1);
    });

    it('reports two multi-key leases sharing a key, and checks the lease token against each key', () => {
      const overlap = sorted([...prim(1, 'M', '40', 0, 5, 1_000, 800, { keys: [0, 1] }), ...prim(2, 'N', '50', 10, 300, 1_000, 900, { keys: [2, 1] })]);
      expect(safety(check(input(overlap, { registers: [] })).violations)).toEqual(['1:overlap']);
      // S on key 1, requested after M was received, must get a token above M's (the largest of M's keys').
      const regression = sorted([...prim(1, 'M', '40', 0, 5, 100, 100, { keys: [0, 1] }), ...prim(2, 'S', '30', 150, 160, 1_000, 900, { keys: undefined }).map((e) => ({ ...e, key: 1 }) as SimEvent)]);
      const r = check(input(regression, { registers: [] }));
      expect(safety(r.violations)).toEqual(['3:token-regression']);
      expect(r.violations[0].lock).toBe('correctness:1');
    });
  });

  describe('leaders (campaign()): no two leaders valid at once', () => {
    const leader = { ns: 'leader' as const, kind: 'campaign' };
    it('reports two terms at once, and a term with a token below its predecessor', () => {
      const two = sorted([...prim(1, 'L1', '10', 0, 5, 1_000, undefined, leader), ...prim(2, 'L2', '20', 10, 500, 1_000, 900, leader)]);
      const r = check(input(two, { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('leader/correctness:0');
      const handOver = sorted([...prim(1, 'L1', '10', 0, 5, 1_000, 400, leader), ...prim(2, 'L2', '20', 10, 401, 1_000, 900, leader)]);
      expect(safety(check(input(handOver, { registers: [] })).violations)).toEqual([]);
      const lower = sorted([...prim(1, 'L1', '20', 0, 5, 1_000, 400, leader), ...prim(2, 'L2', '10', 100, 401, 1_000, 900, leader)]);
      expect(safety(check(input(lower, { registers: [] })).violations)).toEqual(['3:token-regression']);
    });

    it("checks the leader's register apart from key 0's", () => {
      const events = sorted([...prim(1, 'L1', '10', 0, 5, 1_000, 400, leader), ev(100, 1, { ev: 'write', id: 'L1', store: 'etcd', key: 0, ns: 'leader', el: 'x', token: '10', result: 'ok' })]);
      expect(safety(check(input(events, { registers: [{ store: 'etcd', key: 0, list: [] }] })).violations)).toEqual(['2:register-unread']);
      expect(safety(check(input(events, { registers: [{ store: 'etcd', key: 0, ns: 'leader', list: [] }] })).violations)).toEqual(['2:lost-update']);
      expect(safety(check(input(events, { registers: [{ store: 'etcd', key: 0, ns: 'leader', list: [['x', '10']] }] })).violations)).toEqual([]);
    });
  });

  describe('list(): a lease believed valid for the whole call is in its answer', () => {
    // A holds key 0 from 5, valid to 1005, released at 900.
    const base = lease(1, 'A', '10', 0, 5, 1_000, 900);
    const list = (at: number, listed: boolean | undefined, lock: { backend?: 'redlock' } = {}): SimEvent[] => [
      ev(at, 3, { ev: 'list', id: 'L', key: 0, purpose: 'correctness', ...lock }),
      ev(at + 20, 3, { ev: 'list-done', id: 'L', listed }),
    ];

    it('reports a list() that left out a lease valid all through it', () => {
      const r = check(input(sorted([...base, ...list(300, false)]), { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:list-missed']);
      expect(r.stats.list).toEqual({ calls: 1, listed: 0, unlisted: 1, failed: 0 });
    });

    it('accepts it listed, a call that failed, one that began before the grant or ended after the release, and Redlock', () => {
      expect(safety(check(input(sorted([...base, ...list(300, true)]), { registers: [] })).violations)).toEqual([]);
      expect(safety(check(input(sorted([...base, ...list(300, undefined)]), { registers: [] })).violations)).toEqual([]);
      expect(safety(check(input(sorted([...base, ...list(0, false)]), { registers: [] })).violations)).toEqual([]);
      expect(safety(check(input(sorted([...base, ...list(890, false)]), { registers: [] })).violations)).toEqual([]);
      expect(safety(check(input(sorted([...lease(1, 'A', '10', 0, 5, 1_000, 900, 'efficiency', 'redlock'), ...list(300, false, { backend: 'redlock' })]), { registers: [] })).violations)).toEqual([]);
    });
  });

  describe('forceRelease(): the lease it ends is over on that lock when the call begins', () => {
    // A holds key 0 (valid to 1005); the operator force-releases it at 300 (answered at 310); B gets it at 320.
    const force = (at: number, released: boolean | undefined, lock: { key?: number; purpose?: 'correctness' | 'efficiency'; ns?: 'sem' } = {}): SimEvent[] => [
      ev(at, 3, { ev: 'force', id: 'F', key: 0, purpose: 'correctness', ...lock }),
      ev(at + 10, 3, { ev: 'force-done', id: 'F', released }),
    ];
    const base = [...lease(1, 'A', '10', 0, 5, 1_000), ...lease(2, 'B', '20', 100, 320, 1_000, 900)];

    it('does not count the old holder that has not learnt yet as a second holder', () => {
      const r = check(input(sorted([...base, ...force(300, true), ev(700, 1, { ev: 'lost', id: 'A', reason: 'force-released' })]), { registers: [] }));
      expect(safety(r.violations)).toEqual([]);
      expect(r.stats.force).toMatchObject({ calls: 1, released: 1, forced: 1, told: 1, maxTellMs: 390 });
      expect(r.intervals.find((i) => i.id === 'A')).toMatchObject({ forcedAt: T + 300 });
      // Not told at all (Redlock: at its validity end): the same.
      expect(safety(check(input(sorted([...base, ...force(300, true)]), { registers: [] })).violations)).toEqual([]);
      // A call whose answer never came (outcome unknown) may have ended it too.
      expect(safety(check(input(sorted([...base, ...force(300, undefined)]), { registers: [] })).violations)).toEqual([]);
    });

    it('still reports the overlap when the call ended nothing, was on another lock, or came after the second grant', () => {
      expect(safety(check(input(sorted([...base, ...force(300, false)]), { registers: [] })).violations)).toEqual(['1:overlap']);
      expect(safety(check(input(sorted([...base, ...force(300, true, { key: 1 })]), { registers: [] })).violations)).toEqual(['1:overlap']);
      expect(safety(check(input(sorted([...base, ...force(300, true, { purpose: 'efficiency' })]), { registers: [] })).violations)).toEqual(['1:overlap']);
      expect(safety(check(input(sorted([...base, ...force(400, true)]), { registers: [] })).violations)).toEqual(['1:overlap']);
    });

    it("accepts the old holder's late write the fence refuses, and reports one it let in after the new holder's", () => {
      const refused = sorted([...base, ...force(300, true), write(400, 2, 'B', 'b', '20'), write(500, 1, 'A', 'a', '10', 'stale')]);
      expect(safety(check(input(refused, { registers: [{ store: 'etcd', key: 0, list: [['b', '20']] }] })).violations)).toEqual([]);
      const accepted = sorted([...base, ...force(300, true), write(400, 2, 'B', 'b', '20'), write(500, 1, 'A', 'a', '10')]);
      expect(safety(check(input(accepted, { registers: [{ store: 'etcd', key: 0, list: [['b', '20'], ['a', '10']] }] })).violations)).toEqual(['2:stale-accepted']);
    });

    it('reports a force-released holder never told: its extend() succeeds after the call said it ended the lease', () => {
      const revived = sorted([...base, ...force(300, true), ev(350, 1, { ev: 'ext-req', id: 'A', ttl: 1_000 }), ev(360, 1, { ev: 'ext-ok', id: 'A', ttl: 1_000, V: T + 1_360 })]);
      const r = check(input(revived, { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:force-not-told']);
      // An extend asked before the answer may have landed first: not a violation.
      const before = sorted([...base, ...force(300, true), ev(305, 1, { ev: 'ext-req', id: 'A', ttl: 1_000 }), ev(360, 1, { ev: 'ext-ok', id: 'A', ttl: 1_000, V: T + 1_300 })]);
      expect(safety(check(input(before, { registers: [] })).violations)).toEqual([]);
    });

    it('ends every holder of a semaphore, and a multi-key lease on the forced key only', () => {
      const sem = { ns: 'sem' as const, permits: 2 };
      const semLog = sorted([
        ...prim(1, 'A', '10', 0, 5, 1_000, undefined, sem),
        ...prim(2, 'B', '20', 10, 20, 1_000, undefined, sem),
        ...force(300, true, { ns: 'sem' }),
        ...prim(3, 'C', '30', 30, 320, 1_000, 900, sem),
        ...prim(1, 'D', '40', 40, 330, 1_000, 900, sem),
      ]);
      expect(safety(check(input(semLog, { registers: [] })).violations)).toEqual([]);
      // M holds keys 0 and 1: forced on key 0, it still holds key 1 until it learns.
      const multi = sorted([
        ...prim(1, 'M', '40', 0, 5, 1_000, undefined, { keys: [0, 1] }),
        ...force(300, true),
        ...prim(2, 'S0', '50', 10, 320, 1_000, 900, {}),
        ...prim(3, 'S1', '60', 20, 330, 1_000, 900, {}).map((e) => ({ ...e, key: 1 }) as SimEvent),
      ]);
      const r = check(input(multi, { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:overlap']);
      expect(r.violations[0].lock).toBe('correctness:1');
    });
  });
});

describe('simulation checker: the edge fiber (forceRelease() mid-acquisition, stepped-down leaders, keys held after a close)', () => {
  /** A multi-key lease whose grant names its engine owner and the generation its keys were taken in. */
  const multi = (w: number, id: string, token: string, reqAt: number, grantAt: number, validMs: number, relAt: number | undefined, owner: string, gen: number, keys = [0, 1]): SimEvent[] =>
    prim(w, id, token, reqAt, grantAt, validMs, relAt, { keys }).map((e) => (e.ev === 'grant' ? ({ ...e, owner, gen } as SimEvent) : e));
  /**
   * The watcher's forceRelease() of key 0 for request M, the backend having shown it held by `owner`
   * just before; `complete`: whether that attempt held its last key right after the call (default: not yet).
   */
  const watchForce = (at: number, released: boolean | undefined, owner: string, complete: boolean | 'unknown' = false): SimEvent[] => [
    ev(at - 20, 3, { ev: 'watch', id: 'Wt', target: 'M', phase: 'start' }),
    ev(at, 3, { ev: 'force', id: 'F', key: 0, purpose: 'correctness', watch: 'M' }),
    ev(at + 10, 3, { ev: 'force-done', id: 'F', released, owner }),
    ev(at + 12, 3, { ev: 'watch', id: 'Wt', target: 'M', phase: 'end', fired: true, owner, ...(complete !== 'unknown' ? { complete } : {}) }),
  ];

  describe('a multi-key lease granted after a forceRelease() took one of its keys from its attempt', () => {
    it('reports it (forced-key-granted), and the overlap with the one who took the key', () => {
      // M asks at 0; its attempt holds key 0 as X.0-0 when the watcher forces it (100..110) and takes it (W, 120..620); M is granted at 150, generation 0.
      const events = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0'), ...prim(3, 'W', '41', 115, 120, 1_000, 620, {})]);
      const r = check(input(events, { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:forced-key-granted', '1:overlap']);
      expect(r.violations[0]).toMatchObject({ lock: 'correctness:0' });
      expect(r.violations[0].detail).toMatch(/M \(correctness:0\+correctness:1, token 40\) was granted .*\(X\.0-0, generation 0\) and returned true .*never told/);
      expect(r.stats.watch).toEqual({ watches: 1, fired: 1, released: 1 });
      // Even with nobody taking the key after it: a lease without one of its keys.
      const alone = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0')]);
      expect(safety(check(input(alone, { registers: [] })).violations)).toEqual(['1:forced-key-granted']);
    });

    it('accepts an attempt that started over (another generation), a call that ended nothing, a lease held before the call, and one never believed valid', () => {
      // Restarted after the loss (generation 1), it waited for W to release key 0.
      const restarted = sorted([...multi(1, 'M', '40', 0, 630, 1_000, 900, 'X', 1), ...watchForce(100, true, 'X.0-0'), ...prim(3, 'W', '41', 115, 120, 1_000, 620, {})]);
      expect(safety(check(input(restarted, { registers: [] })).violations)).toEqual([]);
      // Answered false (the attempt had let the key go already): nothing ended.
      const none = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, false, 'X.0-0')]);
      expect(safety(check(input(none, { registers: [] })).violations)).toEqual([]);
      // Another owner's key, or the call unanswered (no owner to go by).
      expect(safety(check(input(sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'Y.0-0')]), { registers: [] })).violations)).toEqual([]);
      // Granted before the call: the lease it ended is over on key 0 from the call on (its holder learns later).
      const before = sorted([...multi(1, 'M', '40', 0, 50, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0'), ...prim(3, 'W', '41', 115, 120, 1_000, 620, {})]);
      expect(safety(check(input(before, { registers: [] })).violations)).toEqual([]);
      // The attempt held its last key right after the call (granted on the server before it, received
      // after it): the lease the call ended, over on key 0 from the call on — also when that is not known.
      for (const complete of [true, 'unknown'] as const) {
        const late = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0', complete), ...prim(3, 'W', '41', 115, 120, 1_000, 620, {})]);
        const r = check(input(late, { registers: [] }));
        expect(safety(r.violations)).toEqual([]);
        expect(r.intervals.find((i) => i.id === 'M' && i.lock === 'correctness:0')).toMatchObject({ forcedAt: T + 150, segments: [] });
        // …on that key only: key 1 it still holds.
        expect(r.intervals.find((i) => i.id === 'M' && i.lock === 'correctness:1')!.segments).toEqual([[T + 150, T + 900]]);
      }
      // Granted, but lost at once (told): never believed valid.
      const lost = sorted([...multi(1, 'M', '40', 0, 150, 1_000, undefined, 'X', 0), ev(150, 1, { ev: 'lost', id: 'M', reason: 'force-released' }), ...watchForce(100, true, 'X.0-0')]);
      expect(safety(check(input(lost, { registers: [] })).violations)).toEqual([]);
    });

    it('accepts a lease whose own id the backend shows holding that key right after the grant (it queued for it again), and only that', () => {
      // The call removed X.0-0's queue place at the head of the line before X learnt it was first;
      // X found it gone, queued again under the same id and was given key 0: the backend shows X.0-0
      // holding it right after the grant.
      const heldCheck = (owner?: string, failed = false): SimEvent =>
        ev(152, 1, { ev: 'held-check', id: 'M', key: 0, purpose: 'correctness', ...(owner !== undefined ? { owner } : {}), ...(failed ? { failed } : {}) });
      const requeued = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0'), heldCheck('X.0-0')]);
      const r = check(input(requeued, { registers: [] }));
      expect(safety(r.violations)).toEqual([]);
      expect(r.stats.force.requeued).toBe(1);
      // Somebody else shown, nobody, another key's id of the same attempt, or the look failed: still a lease without that key.
      // Seed 19 of the long run (Redis): the call removed X.0-0's reservation, the watcher saw the
      // attempt's last key held (complete), X.0-0 took key 0 again later; the lease's extend after
      // the call succeeds — the call ended no hold of it, and its key 0 is not cut at the call.
      const extended = [ev(160, 1, { ev: 'ext-req', id: 'M', ttl: 1_000 }), ev(170, 1, { ev: 'ext-ok', id: 'M', ttl: 1_000, V: T + 1_160 })];
      const seen = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0', true), heldCheck('X.0-0'), ...extended]);
      const r19 = check(input(seen, { registers: [] }));
      expect(safety(r19.violations)).toEqual([]);
      expect(r19.stats.force.requeued).toBe(1);
      expect(r19.intervals.find((i) => i.id === 'M' && i.lock === 'correctness:0')!.forcedAt).toBeUndefined();
      // Without the look after the grant, that lease is one the call ended: its extend is force-not-told.
      const unseen = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0', true), ...extended]);
      expect(safety(check(input(unseen, { registers: [] })).violations)).toEqual(['1:force-not-told']);
      for (const after of [heldCheck('W.0'), heldCheck(), heldCheck('X.0-1'), heldCheck(undefined, true)]) {
        const events = sorted([...multi(1, 'M', '40', 0, 150, 1_000, 900, 'X', 0), ...watchForce(100, true, 'X.0-0'), after]);
        const checked = check(input(events, { registers: [] }));
        expect(safety(checked.violations)).toEqual(['1:forced-key-granted']);
        expect(checked.stats.force.requeued).toBe(0);
      }
    });
  });

  describe('a campaign stepped down through its signal, its work running on term.signal', () => {
    const leader = { ns: 'leader' as const, kind: 'campaign' };
    // L1 leads from 5 (valid to 1005 as it was told), steps down at 300 (its campaign's signal), works 10..800; L2 leads from 320.
    const term = (workEnd: number, why: 'signal' | 'done', lostAt?: number): SimEvent[] => [
      ...prim(1, 'L1', '10', 0, 5, 1_000, 805, leader),
      ev(10, 1, { ev: 'work', id: 'L1', phase: 'start' }),
      ev(300, 1, { ev: 'stepdown', id: 'L1' }),
      ...(lostAt !== undefined ? [ev(lostAt, 1, { ev: 'lost', id: 'L1', reason: 'released' })] : []),
      ev(workEnd, 1, { ev: 'work', id: 'L1', phase: 'end', why }),
      ...prim(2, 'L2', '20', 100, 320, 1_000, 900, leader),
    ];

    it('reports the stepped-down leader still working beside the next one (stepped-down-working)', () => {
      const r = check(input(sorted(term(800, 'done')), { registers: [] }));
      expect(safety(r.violations)).toEqual(['1:stepped-down-working']);
      expect(r.violations[0].lock).toBe('leader/correctness:0');
      expect(r.violations[0].detail).toMatch(/L1 \(token 10\) stepped down at .*\(term\.signal never aborted, ended: done\), while L2 .*: 480\.0 ms of two leaders working/);
      expect(r.stats.stepdown).toEqual({ terms: 1, bySignal: 0, byTime: 1, byDrain: 0 });
    });

    it('accepts work that stops when term.signal aborts, or ends before the next term; the step-down ends what remainingMs() said', () => {
      const aborted = check(input(sorted(term(306, 'signal', 305)), { registers: [] }));
      expect(safety(aborted.violations)).toEqual([]);
      expect(aborted.stats.stepdown).toMatchObject({ bySignal: 1 });
      expect(safety(check(input(sorted(term(310, 'done')), { registers: [] })).violations)).toEqual([]);
      // Without the step-down (and its work) the same told validity is a second leader: an overlap as ever.
      const plain = sorted([...prim(1, 'L1', '10', 0, 5, 1_000, 805, leader), ...prim(2, 'L2', '20', 100, 320, 1_000, 900, leader)]);
      expect(safety(check(input(plain, { registers: [] })).violations)).toEqual(['1:overlap']);
    });

    it('counts no work while its process was stopped (SIGSTOP): only the time it ran past its validity', () => {
      // L1 told valid 5..305, works 10..800 on term.signal, which aborts at 800, right after its
      // process runs again; L2 leads from 320. Stopped 250..799 (seed 66 of the long run): nothing done beside L2.
      const stopped = sorted([
        ...prim(1, 'L1', '10', 0, 5, 300, 801, leader),
        ev(10, 1, { ev: 'work', id: 'L1', phase: 'start' }),
        ev(800, 1, { ev: 'stepdown', id: 'L1' }),
        ev(800, 1, { ev: 'lost', id: 'L1', reason: 'stepped-down' }),
        ev(800, 1, { ev: 'work', id: 'L1', phase: 'end', why: 'signal' }),
        ...prim(2, 'L2', '20', 100, 320, 1_000, 900, leader),
      ]);
      expect(safety(check(input(stopped, { registers: [], paused: [{ w: 1, start: T + 250, end: T + 800 }] })).violations)).toEqual([]);
      // Running again from 700: 100 ms of work beside L2.
      expect(safety(check(input(stopped, { registers: [], paused: [{ w: 1, start: T + 250, end: T + 700 }] })).violations)).toEqual(['1:stepped-down-working']);
      // Another worker's pause excuses nothing.
      expect(safety(check(input(stopped, { registers: [], paused: [{ w: 2, start: T + 250, end: T + 800 }] })).violations)).toEqual(['1:stepped-down-working']);
    });
  });

  describe('a key held after its app closed (invariant 5)', () => {
    const held = (excused?: string): SimEvent => ev(500, 1, { ev: 'closed-held', backend: 'postgres', key: 's1/pg/k0', owner: 'X.0-0', remainingMs: 1_800, closedAt: T + 290, recheckMs: 200, ...(excused ? { excused } : {}) });
    const looked = ev(520, 1, { ev: 'close-inspected', keys: 12, failed: 1, closedAt: T + 290 });

    it('reports a key one of the closed app\'s owners still holds', () => {
      const r = check(input(sorted([...clean, held(), looked])));
      expect(kinds(r.violations)).toEqual(['5:held-after-close']);
      expect(r.violations[0]).toMatchObject({ lock: 'postgres:s1/pg/k0' });
      expect(r.violations[0].detail).toMatch(/still held by X\.0-0, an owner of the app whose close\(\) returned .* seen again 200 ms later, 1800 ms of it left/);
      expect(r.stats.closed).toEqual({ closes: 1, keys: 12, failed: 1, held: 1, excused: 0 });
    });

    it('accepts it when a fault on that backend or the way to it overlapped the close, and a close that left nothing', () => {
      const r = check(input(sorted([...clean, held('#2 @1.00s kill -9 postgres, relaunch after 900 ms'), looked])));
      expect(r.violations).toEqual([]);
      expect(r.stats.closed).toMatchObject({ held: 1, excused: 1 });
      expect(check(input(sorted([...clean, looked]))).violations).toEqual([]);
    });
  });
});
