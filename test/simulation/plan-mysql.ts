/**
 * MySQL (MariaDB) in the plan, drawn after everything else from streams of their own, so the plan
 * of every seed is what it was before MySQL joined — the same operations, the same faults at the
 * same indices — except that some of its PostgreSQL locks are now MySQL ones:
 *
 * - each top-level operation of a fiber (drawn per fiber, `w<w>f<f>/mysql`) moves, with even odds,
 *   its PostgreSQL locks to MySQL (the same keys, `…/my/k0`), their PgFence reads and writes to
 *   the MySqlFence register and their transactions to MySQL ones. A whole operation moves at
 *   once, so a nested lock that was the enclosing one's (reentrant, or its other purpose, which
 *   the plan kept apart) stays so; one that was another lock stays another. A decorated call
 *   keeps its declaration's backend (the catalog is the seed's, and a declaration is static);
 *   locks nested in it may move, and are then other locks than its own, which is allowed.
 * - the leader name, when it is on PostgreSQL, moves with even odds (`primitives/mysql`): every
 *   campaign, its register and the operator's force-releases of it together.
 * - the semaphore stays where it is (the MySQL backend has no semaphores yet).
 * - the operator's force-releases of a PostgreSQL key move with even odds (`operator/mysql`).
 * - MySqlTransactionLock holders (`w<w>f<f>/xact`): after each top-level operation of a worker's own
 *   fibers, with odds of a fifth, one more operation — a transaction that takes a key of the set
 *   (`…/my/k0`, the MySQL leases' lock) and reads and writes its MySqlFence register with the token,
 *   then commits, rolls back or loses its connection (`XactSpec`). Inserted: the operations drawn
 *   before stay what they were, in their order.
 * - faults of its own (`faults/mysql`): kill -9 of mariadbd and a relaunch after a seeded
 *   downtime (crash recovery), a clean restart, `KILL` of every session (pools, doorbell
 *   listeners, register connections), SIGSTOP of the server, and delays and blackholes of a
 *   worker's connections to it — each appended to the schedule (indices after the others'), slid
 *   past a fault on the same resource, as the main schedule does.
 */
import type { Prng } from './prng.js';
import { faultResource, type Fault, type FiberOp, type LockOp, type Plan, type SimParams, type Step, type XactSpec } from './plan.js';

/** Move `op`'s PostgreSQL locks (not a decorated call's own: its declaration's) to MySQL, and the steps that go with them. */
function moveOp(op: LockOp, leaderMoves: boolean, moves: boolean): void {
  if (op.ns === 'sem') return;
  const move = op.ns === 'leader' ? leaderMoves : moves;
  if (move && op.backend === 'postgres' && op.kind !== 'decorated') op.backend = 'mysql';
  const mine = op.backend === 'mysql';
  const steps = (list: Step[]): void => {
    for (const s of list) {
      if (mine && (s.s === 'rmw' || s.s === 'read' || s.s === 'work') && s.store === 'postgres') s.store = 'mysql';
      if (s.s !== 'nest') continue;
      moveOp(s.op, leaderMoves, moves);
      // The nested lease's write of this lease's read goes to this lease's register.
      for (const t of s.op.steps) if (mine && t.s === 'write-outer' && t.store === 'postgres') t.store = 'mysql';
    }
  };
  steps(op.steps);
  if (op.rival) steps(op.rival.steps);
}

/** The leader name moves to MySQL (a seed-wide draw), when it is on PostgreSQL. */
export function leaderToMySql(root: Prng, plan: Pick<Plan, 'primitives'>): boolean {
  const leader = plan.primitives?.leader;
  const moves = root.fork('primitives/mysql').chance(0.5);
  if (!leader || leader.backend !== 'postgres' || !moves) return false;
  leader.backend = 'mysql';
  return true;
}

/** Each top-level operation of a fiber (one draw per operation, whatever it is) moves its PostgreSQL locks with even odds. */
export function fiberToMySql(rng: Prng, ops: FiberOp[], leaderMoves: boolean): void {
  for (const op of ops) {
    const moves = rng.chance(0.5);
    if (op.kind === 'sleep') continue;
    if (op.kind === 'force') {
      const t = op.target;
      if (t.backend === 'postgres' && (t.ns === 'leader' ? leaderMoves : t.ns === undefined && moves)) t.backend = 'mysql';
      continue;
    }
    moveOp(op, leaderMoves, moves);
  }
}

/** The odds of a transaction holder after each top-level operation of a fiber. */
export const XACT_ODDS = 0.2;

/** Insert MySqlTransactionLock holders between `ops` (one draw per operation, whatever it is). */
export function insertXacts(rng: Prng, ops: FiberOp[], keys: number): void {
  for (let i = 0; i < ops.length; i++) {
    if (!rng.chance(XACT_ODDS)) continue;
    ops.splice(i + 1, 0, genXact(rng, keys));
    i += 1;
  }
}

function genXact(rng: Prng, keys: number): LockOp {
  const xact: XactSpec = {
    isolation: rng.chance(0.6) ? 'repeatable-read' : 'read-committed',
    // Held around the lease ttls now and then: a pause of the worker, a fault on the server, meanwhile.
    holdMs: rng.chance(0.5) ? 0 : rng.chance(0.8) ? rng.int(20, 400) : rng.int(400, 1_500),
    thinkMs: rng.chance(0.5) ? 0 : rng.int(5, 200),
    write: rng.chance(0.85),
    endAfterMs: rng.chance(0.6) ? 0 : rng.int(10, 600),
    end: rng.weighted<XactSpec['end']>([
      [6, 'commit'],
      [2, 'rollback'],
      [1.5, 'destroy'],
    ]),
  };
  const wait = rng.weighted([
    [2, 0],
    [2, 300],
    [3, 1_500],
    [1, 4_000],
  ]);
  return { kind: 'xact', key: rng.int(0, keys - 1), purpose: 'correctness', backend: 'mysql', ttl: 0, wait, steps: [], xact };
}

/** When a fault frees its resource (and what comes back after it takes), as the main schedule counts it. */
const busyUntil = (f: Fault): number =>
  f.at + f.dur + (['etcd-kill', 'worker-crash', 'app-restart', 'pg-kill', 'pg-restart', 'zk-kill', 'my-kill', 'my-restart'].includes(f.kind) ? 1_500 : ['pg-terminate', 'zk-pause', 'redlock-kill', 'redlock-pause', 'my-kill-sessions', 'my-pause'].includes(f.kind) ? 500 : 0);

/** MySQL's faults, after the schedule `others` (never on a resource while one of those holds it); none in the controls. */
export function genMySqlFaults(rng: Prng, params: SimParams, others: Fault[]): Fault[] {
  if (params.control) return [];
  const D = params.durationMs;
  const count = Math.max(2, Math.round(D / 3_000));
  const placed: Fault[] = [...others];
  const out: Fault[] = [];
  for (let i = 0; i < count; i++) {
    const kind = rng.weighted<'my-kill' | 'my-restart' | 'my-kill-sessions' | 'my-pause' | 'delay' | 'blackhole'>([
      [2, 'my-kill'],
      [1, 'my-restart'],
      [1.5, 'my-kill-sessions'],
      [1.5, 'my-pause'],
      [1, 'delay'],
      [1, 'blackhole'],
    ]);
    const worker = rng.int(0, params.workers - 1);
    let at = rng.int(Math.floor(D * 0.05), Math.floor(D * 0.8));
    const targets = rng.pick<Array<'mysql' | 'register'>>([['mysql'], ['mysql'], ['mysql', 'register']]);
    let fault: Fault;
    switch (kind) {
      case 'my-kill':
        fault = { kind, at, dur: rng.int(100, 1_500) };
        break;
      case 'my-restart':
        fault = { kind, at, dur: 1_000 };
        break;
      case 'my-kill-sessions':
        fault = { kind, at, dur: 0 };
        break;
      case 'my-pause':
        // Within the ttls and past them: leases end on the server's clock meanwhile.
        fault = { kind, at, dur: rng.int(200, 3_000) };
        break;
      case 'delay':
        fault = { kind, at, worker, ms: rng.pick([30, 150, 400, 900, 1_800]), dur: rng.int(500, 2_500), targets };
        break;
      case 'blackhole':
        fault = { kind, at, worker, dur: rng.int(300, 3_000), targets };
        break;
    }
    // Slide past a fault on the same resource; drop what no longer fits before 90 % of the run.
    const resource = faultResource(fault);
    for (let moved = true; moved; ) {
      moved = false;
      for (const other of placed) {
        if (faultResource(other) !== resource || at >= busyUntil(other) + 100 || busyUntil({ ...fault, at }) + 100 <= other.at) continue;
        at = busyUntil(other) + 100;
        moved = true;
      }
    }
    if (at + fault.dur > D * 0.9) continue;
    fault.at = at;
    placed.push(fault);
    out.push(fault);
  }
  return out;
}
