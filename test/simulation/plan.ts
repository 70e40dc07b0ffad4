/**
 * The plan of one simulation seed: per worker fiber, a list of lock operations over a small key
 * set (so there is contention), and a fault schedule. Pure and deterministic: the same
 * parameters give the same plan (plan.spec.ts checks it), so a failing seed replays with the same
 * operations and faults — only the timing differs.
 */
import { fiberToMySql, genMySqlFaults, insertXacts, leaderToMySql } from './plan-mysql.js';
import { Prng } from './prng.js';

export type Purpose = 'efficiency' | 'correctness';
/**
 * A fenced register: EtcdFence / RedisFence (for leases of the routed backends), PgFence (for
 * PostgreSQL leases), MySqlFence (for MySQL leases), or 'zookeeper': an EtcdFence register of its
 * own for ZooKeeper leases (their tokens are the ZooKeeper lock's zxids, not etcd revisions: one
 * register per token sequence).
 */
export type Store = 'etcd' | 'redis' | 'postgres' | 'mysql' | 'zookeeper';
/**
 * Where a lock lives: `undefined` routes by purpose (efficiency: Redis, correctness: etcd);
 * 'postgres', 'mysql' or 'zookeeper' names the backend per lock (`backend: …`), both purposes. There a key
 * is one lock whatever the purpose (one lease row, one line of znodes per key): efficiency and
 * correctness leases of a key exclude each other, share one token sequence, and a context holding
 * it for one purpose must not nest the other. 'redlock' (five independent Redis masters) is
 * efficiency only: it issues no tokens and the library refuses `purpose: 'correctness'` there.
 * MySQL locks are PostgreSQL ones moved there after the plan was drawn (plan-mysql.ts).
 */
export type LockBackendName = 'postgres' | 'mysql' | 'zookeeper' | 'redlock';
export type ControlMode = 'nolock' | 'unfenced';

export type Step =
  /** Keep the lease (and do nothing) for `ms`; may run past the ttl. */
  | { s: 'hold'; ms: number }
  | { s: 'extend'; ttl: number }
  /**
   * Fenced read-modify-write of this lease's register: read, think, append one element, write.
   * `tx` (postgres, mysql): the read, the write and COMMIT in one transaction on one connection (the
   * README's way: the read's row lock keeps a newer holder's read waiting); otherwise each
   * statement commits on its own (the fence alone refuses a stale write).
   */
  | { s: 'rmw'; store: Store; token: 'explicit' | 'implicit'; thinkMs: number; checkSignal: boolean; tx?: boolean; key?: number }
  /** The read half of a split read-modify-write (the write comes in a nested lease's body). */
  | { s: 'read'; store: Store }
  /** The write half, inside a nested lease, to the *outer* lease's register. */
  | { s: 'write-outer'; store: Store; token: 'explicit' | 'implicit' }
  /** A nested lock operation: another key (either order across fibers) or the same key (reentrant). */
  | { s: 'nest'; op: LockOp }
  /**
   * A leader's work on `term.signal` (the edge fiber's stepped-down campaigns): a loop of short
   * sleeps — and, with `store`, a fenced read-modify-write of the leader's register now and then —
   * until `term.signal` aborts or `ms` have passed. Its interval is logged: the leader believes it
   * leads for as long as it works, whatever `remainingMs()` says.
   */
  | { s: 'work'; ms: number; store?: Store };

/**
 * A method of a provider decorated with `@DistributedLock` (the worker builds one class per entry
 * of the seed's catalog; declarations are static, so ttl, wait, purpose and onBusy are per method):
 * - single: one declaration;
 * - stacked: two declarations on one method (outer: key2/purpose2, inner: key/purpose), both held;
 * - inherited: a decorated override (key2/purpose2) calling the decorated base method (key/purpose);
 * - observable: a declared `Observable` return, re-subscribed (`repeat`), sometimes unsubscribed
 *   mid-way (while it waits or while it runs).
 */
export type DecoShape = 'single' | 'stacked' | 'inherited' | 'observable';

export interface DecoSpec {
  shape: DecoShape;
  purpose: Purpose;
  /** stacked / inherited: the purpose of the second declaration (key2). */
  purpose2: Purpose;
  /** The declaration's `backend` (undefined: routed by purpose). */
  backend?: LockBackendName;
  /** stacked / inherited: the second declaration's. */
  backend2?: LockBackendName;
  ttl: number;
  wait: number;
  onBusy: 'wait' | 'throw' | 'skip';
}

export interface DecoCall {
  /** Index into the plan's catalog. */
  method: number;
  /** stacked / inherited: the second declaration's key (index into the key set). */
  key2: number;
  /** observable: subscriptions in a row (repeat). */
  repeat: number;
  /** observable: unsubscribe this long after the first subscription. */
  unsubscribeAfterMs?: number;
}

/**
 * A key namespace of its own: 'sem' — the semaphore keys (`…/sem/k0`: every caller of one gives
 * the seed's `permits`); 'leader' — the leader names of `campaign()` (`…/leader/k0`).
 */
export type KeyNs = 'sem' | 'leader';

export interface LockOp {
  /**
   * campaign: `campaign()` of the seed's leader name (ns 'leader'), waiting without end (until it
   * leads, or the drain); the leader then runs the steps and steps down (release).
   */
  kind: 'acquire' | 'try' | 'using' | 'abort-wait' | 'decorated' | 'campaign' | 'xact';
  /** xact: what the transaction does (plan-mysql.ts); the op's key is a MySQL lock, `correctness`, no steps. */
  xact?: XactSpec;
  /** decorated: which method, and its other arguments. */
  deco?: DecoCall;
  /** Index into the key set. */
  key: number;
  purpose: Purpose;
  /** 'postgres' / 'mysql' / 'zookeeper' / 'redlock': `backend: …` on the call (decorated: the declaration's, repeated here). */
  backend?: LockBackendName;
  ttl: number;
  wait: number;
  /** abort-wait: abort the AbortSignal after this long (while it waits, usually). */
  abortAfterMs?: number;
  /** acquire/try: do not release at the end; the lease is left to run out. */
  abandon?: boolean;
  /** A key of another namespace (semaphore keys, leader names): not the key set's. */
  ns?: KeyNs;
  /** ns 'sem': the semaphore's permits (the seed's, the same for every caller of the key). */
  permits?: number;
  /** A multi-key lease: every key (indices into the key set, in the order the call names them; `key` is the first). */
  keys?: number[];
  /**
   * Edge fiber, multi-key: another lease of this process takes this key of the set (its highest:
   * the last one the ordered path takes) before the request and holds it `ms`, so the acquisition
   * waits for it holding the keys before it (and the one-step path, where there is one, answers busy).
   */
  blocker?: { key: number; ms: number; ttl: number };
  /**
   * Edge fiber, multi-key: the runner asks the watcher (another worker) to watch this key of the
   * set while the request is pending, and once the backend shows it held by a multi-key owner, to
   * forceRelease() it and take it itself (tryAcquire, ttl `ttl`, held `holdMs`).
   */
  watch?: { key: number; holdMs: number; ttl: number };
  /**
   * Edge fiber, multi-key with a blocker: `app.close()` of this worker's app `afterMs` after the
   * acquisition took its first key while it still waits for a later one, a new app `downMs` later.
   */
  close?: { afterMs: number; downMs: number };
  /** campaign (edge fiber): abort the signal passed to campaign() this long after the grant — stepping down mid-term. */
  stepDownAfterMs?: number;
  /** campaign with stepDownAfterMs: a rival candidate of this process campaigning from the grant on; when it leads it runs these steps and steps down. */
  rival?: { steps: Step[] };
  steps: Step[];
}

/**
 * A MySqlTransactionLock holder (kind 'xact', plan-mysql.ts): the worker begins a transaction on a
 * register connection (READ COMMITTED, or the default REPEATABLE READ — the lock is then its first
 * statement), takes the op's key with `acquire(conn, key, { wait })`, waits `holdMs`, reads the
 * key's MySqlFence register with the token, thinks `thinkMs`, writes it (unless `write` is false),
 * waits `endAfterMs`, then commits, rolls back, or destroys its connection.
 */
export interface XactSpec {
  isolation: 'repeatable-read' | 'read-committed';
  holdMs: number;
  thinkMs: number;
  write: boolean;
  endAfterMs: number;
  end: 'commit' | 'rollback' | 'destroy';
}

/** What an operator's `forceRelease()` / `inspect()` names: a lock of the seed. */
export interface ForceTarget {
  key: number;
  purpose: Purpose;
  backend?: LockBackendName;
  ns?: KeyNs;
}

export type FiberOp =
  | LockOp
  | { kind: 'sleep'; ms: number }
  /** An operator's forceRelease() of a lock of the seed (an `inspect()` first, now and then). */
  | { kind: 'force'; target: ForceTarget; inspect: boolean };

export type Fault =
  | { kind: 'delay'; at: number; worker: number; ms: number; dur: number; targets: ProxyTarget[] }
  | { kind: 'blackhole'; at: number; worker: number; dur: number; targets: ProxyTarget[] }
  | { kind: 'pause'; at: number; worker: number; dur: number }
  /** SIGSTOP whichever worker next completes a fenced read (between its read and its write). */
  | { kind: 'pause-holder'; at: number; dur: number }
  | { kind: 'redis-kill'; at: number; dur: number }
  | { kind: 'etcd-kill'; at: number; member: number | 'leader'; dur: number }
  /** kill -9 of the postmaster (locks and the PgFence register), relaunched (crash recovery) after `dur`. */
  | { kind: 'pg-kill'; at: number; dur: number }
  /** Fast restart of PostgreSQL (every session ends, the same data comes back at once); `dur` is what the plan reserves for it. */
  | { kind: 'pg-restart'; at: number; dur: number }
  /** pg_terminate_backend() of every client session (the server stays up): pools, LISTEN sessions, open register transactions. */
  | { kind: 'pg-terminate'; at: number; dur: number }
  /** kill -9 of the ZooKeeper server, restarted after `dur` (sessions and znodes come back from its log and snapshot). */
  | { kind: 'zk-kill'; at: number; dur: number }
  /** SIGSTOP of the ZooKeeper server for `dur` (around and past the session timeout: sessions expire when it resumes). */
  | { kind: 'zk-pause'; at: number; dur: number }
  /**
   * kill -9 of these Redlock masters (indices of the five; no persistence), restarted empty after
   * `dur` — at least the longest ttl + 500 ms, the README's delayed restart: by then every lease
   * they knew has ended. Mostly a minority (1 or 2); now and then a majority (3: no lock can be
   * taken or kept meanwhile, liveness afterwards).
   */
  | { kind: 'redlock-kill'; at: number; masters: number[]; dur: number }
  /** SIGSTOP of these Redlock masters (1 or 2 of the five) for `dur`; they keep their data. */
  | { kind: 'redlock-pause'; at: number; masters: number[]; dur: number }
  /** kill -9 of mariadbd (locks and the MySqlFence register), relaunched (crash recovery) after `dur` (plan-mysql.ts). */
  | { kind: 'my-kill'; at: number; dur: number }
  /** A clean restart of mariadbd (SIGTERM: every session ends, the same data comes back); `dur` is what the plan reserves for it. */
  | { kind: 'my-restart'; at: number; dur: number }
  /** `KILL` of every session of the user (the server stays up): pools, doorbell listeners, open register transactions. */
  | { kind: 'my-kill-sessions'; at: number; dur: number }
  /** SIGSTOP of mariadbd for `dur` (its clock, which lease expiries are on, goes on). */
  | { kind: 'my-pause'; at: number; dur: number }
  /** app.close() while calls wait, then a new app in the same process after `dur`. */
  | { kind: 'app-restart'; at: number; worker: number; dur: number }
  /** kill -9 of the worker process, a new one after `dur`. */
  | { kind: 'worker-crash'; at: number; worker: number; dur: number };

export type FaultKind = Fault['kind'];
/**
 * 'postgres' / 'mysql' / 'zookeeper': those lock backends' connections; 'redlock': the worker's
 * connections to all five Redlock masters; 'register': every register client (Redis, etcd,
 * PostgreSQL, MySQL).
 */
export type ProxyTarget = 'redis' | 'etcd' | 'postgres' | 'mysql' | 'zookeeper' | 'redlock' | 'register';

export interface SimParams {
  seed: number;
  /** Length of the operation phase, ms. */
  durationMs: number;
  workers: number;
  fibers: number;
  control?: ControlMode;
  /** Keep only these fault indices (of the generated schedule): minimising a failing seed. */
  faultFilter?: number[];
  /** Cap operations per fiber (minimising). */
  maxOps?: number;
}

export interface Plan {
  params: SimParams;
  keys: number;
  sessionTtlSeconds: number;
  /** Largest ttl any lease or extend of the plan uses, ms. */
  maxTtl: number;
  /** workers × fibers × operations. */
  fibers: FiberOp[][][];
  /** Index = position in the generated schedule (kept when filtered). */
  faults: Array<Fault & { index: number }>;
  /** A worker kill -9'd at the end while it may hold locks (liveness check), or undefined. */
  endCrash?: number;
  /** The decorated methods every worker's app provides (see DecoSpec). */
  decorated: DecoSpec[];
  /** The seed's semaphore (key `…/sem/k0`, one lock) and its leader name (`…/leader/k0`); absent in the controls. */
  primitives?: Primitives;
  /** The worker whose last fiber (index `params.fibers`) is the operator's: sleeps and forceRelease() calls. */
  operator?: number;
  /**
   * The edge fiber (one more fiber, after the others of its worker) and the watcher worker (another
   * one, when there are two or more): multi-key leases of 3–10 keys (k0 always among them; key indices
   * up to EDGE_KEYS - 1), some behind a blocker, watched by the watcher or closed under; and
   * campaigns stepped down through their signal while work runs on `term.signal`. Absent in the controls.
   */
  edge?: { worker: number; watcher: number };
  /**
   * The ttl of the edge fiber's leases whose app is closed under their wait, when it has any
   * (LONG_TTL): above maxTtl, never on Redlock — liveness bounds count it, the Redlock restart delay
   * (which must outlast every Redlock lease) does not.
   */
  longTtl?: number;
  /**
   * Each worker's Redis client for the Redis backend (the lock Redis): ioredis through `redis.url`,
   * or the application's node-redis or iovalkey client through `redis.client` — drawn per worker from a stream
   * of its own, so the rest of a seed's plan is what it was before the draw existed.
   */
  redisClients: RedisClientKind[];
}

export type RedisClientKind = 'ioredis' | 'node-redis' | 'iovalkey';

/** The ttl of the edge fiber's multi-key leases closed under (see Plan.longTtl). */
export const LONG_TTL = 5_000;
/** Key indices the edge fiber's multi-key leases draw from (k0…k9): beyond the key set, so a set is up to 10 keys. */
export const EDGE_KEYS = 10;
/** How many key indices a plan's locks use: its key set, or the edge fiber's larger range. */
export const keyCount = (plan: Pick<Plan, 'keys' | 'edge'>): number => (plan.edge ? Math.max(plan.keys, EDGE_KEYS) : plan.keys);

/** The seed's new primitives: one semaphore lock and one leader name, each on one backend. */
export interface Primitives {
  sem: { purpose: Purpose; backend?: LockBackendName; permits: number };
  leader: { purpose: Purpose; backend?: LockBackendName };
}

export const DEFAULT_PARAMS: Omit<SimParams, 'seed'> = { durationMs: 9_000, workers: 3, fibers: 2 };

/** The Redlock masters the runner starts (an odd number: a majority of 3 survives 2 down). */
export const REDLOCK_MASTERS = 5;
/** ttls of leases and extends; extends also draw short ones (30..EXTEND_SHORT_MAX ms). */
const TTLS = [150, 250, 250, 400, 400, 700, 1_000, 1_500, 2_500];
const EXTEND_SHORT_MAX = 300;

export function generatePlan(params: SimParams): Plan {
  const root = new Prng(params.seed);
  const shape = root.fork('shape');
  const keys = shape.int(2, 3);
  const sessionTtlSeconds = shape.pick([2, 2, 3]);
  // ttls around and beyond the session ttl; extends include very short ones.
  const ctx: GenContext = { keys, ttls: TTLS, control: params.control, maxTtl: 0, decorated: [] };
  if (params.control !== 'nolock') ctx.decorated = genCatalog(root.fork('decorated'), ctx);
  // Semaphores, multi-key leases and leaders draw from streams of their own (forks: the streams
  // above are what they were before them); none in the controls.
  if (!params.control) ctx.primitives = genPrimitives(root.fork('primitives'));

  const fibers: FiberOp[][][] = [];
  for (let w = 0; w < params.workers; w++) {
    const perWorker: FiberOp[][] = [];
    for (let f = 0; f < params.fibers; f++) {
      const rng = root.fork(`w${w}f${f}`);
      const prim = root.fork(`w${w}f${f}/primitives`);
      const ops: FiberOp[] = [];
      let nominal = 0;
      const limit = params.maxOps ?? 400;
      while (nominal < 3 * params.durationMs && ops.length < limit) {
        const op = genFiberOp(rng, prim, ctx);
        ops.push(op);
        nominal += op.kind === 'sleep' ? op.ms : op.kind === 'force' ? 0 : 150 + nominalMs(op);
      }
      perWorker.push(ops);
    }
    fibers.push(perWorker);
  }
  // MySQL: some PostgreSQL locks move there, from streams of their own (plan-mysql.ts).
  const leaderMoves = ctx.primitives ? leaderToMySql(root, ctx) : false;
  if (!params.control) fibers.forEach((perWorker, w) => perWorker.forEach((ops, f) => fiberToMySql(root.fork(`w${w}f${f}/mysql`), ops, leaderMoves)));
  // …and MySqlTransactionLock holders between a fiber's operations (streams of their own: every
  // operation above stays what it was, in its order).
  if (!params.control) fibers.forEach((perWorker, w) => perWorker.forEach((ops, f) => insertXacts(root.fork(`w${w}f${f}/xact`), ops, keys)));
  // The operator: one more fiber on one worker, forceRelease() of a lock of the seed every 0.5–1.5 s.
  let operator: number | undefined;
  if (ctx.primitives) {
    const rng = root.fork('operator');
    operator = rng.int(0, params.workers - 1);
    const ops: FiberOp[] = [];
    let nominal = 0;
    while (nominal < 3 * params.durationMs && ops.length < (params.maxOps ?? 400)) {
      const ms = rng.int(500, 1_500);
      ops.push({ kind: 'sleep', ms }, { kind: 'force', target: genForceTarget(rng, ctx), inspect: rng.chance(0.3) });
      nominal += ms;
    }
    if (!params.control) fiberToMySql(root.fork('operator/mysql'), ops, leaderMoves);
    fibers[operator].push(ops);
  }
  // The edge fiber, from a stream of its own (every stream above stays what it was): one more fiber
  // on one worker, and the watcher — another worker — that the runner points at its multi-key requests.
  let edge: Plan['edge'];
  if (ctx.primitives) {
    const rng = root.fork('edge');
    const worker = rng.int(0, params.workers - 1);
    const watcher = params.workers > 1 ? (worker + rng.int(1, params.workers - 1)) % params.workers : worker;
    const ops: FiberOp[] = [];
    let nominal = 0;
    while (nominal < 3 * params.durationMs && ops.length < (params.maxOps ?? 400)) {
      const op = genEdgeOp(rng, ctx);
      ops.push(op);
      nominal += op.kind === 'sleep' ? op.ms : op.kind === 'force' ? 0 : 150 + nominalMs(op) + (op.blocker?.ms ?? 0);
    }
    fiberToMySql(root.fork('edge/mysql'), ops, leaderMoves);
    fibers[worker].push(ops);
    edge = { worker, watcher };
  }

  // The Redlock restart delay must outlast every lease and extend of the plan: the longest ttl
  // either can draw — never below the plan's own max (ctx.maxTtl, extends included; plan.spec
  // checks it), and not taken from the drawn operations, so the schedule stays the same under
  // --max-ops (minimising).
  const faults = genFaults(root.fork('faults'), params, sessionTtlSeconds, Math.max(...TTLS, EXTEND_SHORT_MAX));
  const endRng = root.fork('end');
  const endCrash = endRng.chance(0.4) ? endRng.int(0, params.workers - 1) : undefined;
  // MySQL's faults after the others (their indices too), in time order with them.
  const kept = [...faults, ...genMySqlFaults(root.fork('faults/mysql'), params, faults)]
    .map((fault, index) => ({ ...fault, index }))
    .filter((fault) => params.faultFilter === undefined || params.faultFilter.includes(fault.index))
    .sort((a, b) => a.at - b.at);
  const clients = root.fork('redis-clients');
  const redisClients = Array.from({ length: params.workers }, () => clients.pick<RedisClientKind>(['ioredis', 'node-redis', 'iovalkey']));
  const plan: Plan = { params, keys, sessionTtlSeconds, maxTtl: ctx.maxTtl, fibers, faults: kept, endCrash, decorated: ctx.decorated, redisClients };
  if (ctx.primitives) {
    plan.primitives = ctx.primitives;
    plan.operator = operator;
    plan.edge = edge;
    if (ctx.longTtl !== undefined) plan.longTtl = ctx.longTtl;
  }
  return plan;
}

/**
 * The seed's semaphore and leader name. The semaphore is one lock per seed (contention: every
 * semaphore call of the seed goes to it), permits 2 or 3, on Redis (routed efficiency), etcd
 * (routed correctness), ZooKeeper or PostgreSQL (when its backend has semaphores: the worker looks
 * at `capabilities.semaphore`). The leader name on etcd, ZooKeeper, PostgreSQL (fenced: the leader
 * writes a register) or Redis.
 */
function genPrimitives(rng: Prng): Primitives {
  const sem = rng.weighted<{ purpose: Purpose; backend?: LockBackendName }>([
    [2, { purpose: 'efficiency' }],
    [2, { purpose: 'correctness' }],
    [2, { purpose: 'correctness', backend: 'zookeeper' }],
    [1, { purpose: 'efficiency', backend: 'zookeeper' }],
    [1, { purpose: 'correctness', backend: 'postgres' }],
  ]);
  const leader = rng.weighted<{ purpose: Purpose; backend?: LockBackendName }>([
    [2, { purpose: 'correctness' }],
    [2, { purpose: 'correctness', backend: 'zookeeper' }],
    [1, { purpose: 'correctness', backend: 'postgres' }],
    [1, { purpose: 'efficiency' }],
  ]);
  return { sem: { ...sem, permits: rng.pick([2, 2, 3]) }, leader };
}

/** A lock for the operator to force-release: a key of the key set (any backend), the semaphore, or the leader name. */
function genForceTarget(rng: Prng, ctx: GenContext): ForceTarget {
  const p = ctx.primitives!;
  const which = rng.weighted<'key' | 'sem' | 'leader'>([[4, 'key'], [3, 'sem'], [2, 'leader']]);
  if (which === 'sem') return withBackend<ForceTarget>({ key: 0, purpose: p.sem.purpose, ns: 'sem' }, p.sem.backend);
  if (which === 'leader') return withBackend<ForceTarget>({ key: 0, purpose: p.leader.purpose, ns: 'leader' }, p.leader.backend);
  const backend = pickBackend(rng, ctx);
  const purpose: Purpose = backend === 'redlock' ? 'efficiency' : rng.pick<Purpose>(['efficiency', 'correctness']);
  return withBackend<ForceTarget>({ key: rng.int(0, ctx.keys - 1), purpose }, backend);
}

function withBackend<T extends { backend?: LockBackendName }>(o: T, backend: LockBackendName | undefined): T {
  if (backend) o.backend = backend;
  return o;
}

/**
 * A top-level operation of a new primitive: a semaphore acquisition (hold and extend steps), a
 * multi-key lease over two keys of the key set in random order (hold, extend, fenced writes to
 * either key's register), or a campaign for the seed's leader name (hold past the ttl — renewed —
 * and fenced writes to the leader's register).
 */
function genPrimitiveOp(rng: Prng, ctx: GenContext): LockOp {
  const p = ctx.primitives!;
  const which = rng.weighted<'sem' | 'multi' | 'campaign'>([[4, 'sem'], [4, 'multi'], [2, 'campaign']]);
  const ttl = rng.pick(ctx.ttls);
  ctx.maxTtl = Math.max(ctx.maxTtl, ttl);
  if (which === 'sem') {
    const kind = rng.weighted<LockOp['kind']>([[4, 'acquire'], [2, 'try'], [4, 'using']]);
    const wait = kind === 'try' ? 0 : rng.weighted([[1, 0], [3, 1_000], [2, 3_000]]);
    const op = withBackend<LockOp>({ kind, key: 0, ns: 'sem', permits: p.sem.permits, purpose: p.sem.purpose, ttl, wait, steps: [] }, p.sem.backend);
    // Holders overlap: mostly holds of a good part of the ttl, sometimes past it.
    const n = rng.int(1, 3);
    for (let i = 0; i < n; i++) {
      if (rng.chance(0.7)) op.steps.push({ s: 'hold', ms: rng.chance(0.8) ? rng.int(Math.floor(ttl * 0.2), Math.floor(ttl * 0.8)) : rng.int(Math.floor(ttl * 0.7), Math.floor(ttl * 1.4)) });
      else op.steps.push(genExtend(rng, ctx));
    }
    return op;
  }
  if (which === 'campaign') {
    const op = withBackend<LockOp>({ kind: 'campaign', key: 0, ns: 'leader', purpose: p.leader.purpose, ttl, wait: 0, steps: [] }, p.leader.backend);
    const fenced = p.leader.purpose === 'correctness';
    const n = rng.int(1, 4);
    for (let i = 0; i < n; i++) {
      if (fenced && rng.chance(0.5)) op.steps.push({ s: 'rmw', store: fencedStore(rng, op), token: 'explicit', thinkMs: rng.chance(0.8) ? rng.int(0, 40) : rng.int(ttl / 2, ttl * 1.2), checkSignal: rng.chance(0.3) });
      // A term outlives its ttl: the lease is renewed (no maxHold).
      else op.steps.push({ s: 'hold', ms: rng.chance(0.6) ? rng.int(0, Math.floor(ttl * 0.5)) : rng.int(ttl, ttl * 3) });
    }
    return op;
  }
  const backend = pickBackend(rng, ctx);
  const purpose: Purpose = backend === 'redlock' ? 'efficiency' : rng.pick<Purpose>(['efficiency', 'correctness']);
  const first = rng.int(0, ctx.keys - 1);
  const second = (first + rng.int(1, ctx.keys - 1)) % ctx.keys;
  const keys = [first, second];
  const kind = rng.weighted<LockOp['kind']>([[4, 'acquire'], [2, 'try'], [4, 'using']]);
  const wait = kind === 'try' ? 0 : rng.weighted([[1, 0], [3, 200], [3, 1_000], [2, 3_000]]);
  const op = withBackend<LockOp>({ kind, key: first, keys, purpose, ttl, wait, steps: [] }, backend);
  const n = rng.int(1, 4);
  for (let i = 0; i < n; i++) {
    const choice = rng.weighted<string>([[3, 'hold'], [1.5, 'extend'], [purpose === 'correctness' ? 4 : 0, 'rmw']]);
    if (choice === 'hold') op.steps.push({ s: 'hold', ms: rng.chance(0.8) ? rng.int(0, Math.floor(ttl * 0.3)) : rng.int(Math.floor(ttl * 0.7), Math.floor(ttl * 1.4)) });
    else if (choice === 'extend') op.steps.push(genExtend(rng, ctx));
    else {
      // To either key's register, with the lease's token (implicit: the fence finds the lease on that key).
      const step: Step = {
        s: 'rmw',
        store: fencedStore(rng, op),
        token: kind === 'using' && rng.chance(0.5) ? 'implicit' : 'explicit',
        thinkMs: rng.chance(0.8) ? rng.int(0, 40) : rng.int(ttl / 2, ttl * 1.2),
        checkSignal: rng.chance(0.3),
        key: rng.pick(keys),
      };
      if (backend === 'postgres') step.tx = rng.chance(0.5);
      op.steps.push(step);
    }
  }
  return op;
}

/** The edge fiber's multi-key backends: those that take keys one by one (PostgreSQL, ZooKeeper), or when a key is busy (Redis, etcd). */
type EdgeBackend = 'postgres' | 'zookeeper' | 'redis' | 'etcd';

/**
 * An operation of the edge fiber: a multi-key lease over 3–10 keys (k0 among them, the first the
 * ordered path takes), sometimes behind a blocker on its highest key, watched by the watcher
 * (forceRelease() of one of its keys mid-acquisition) or with this app closed under its wait; a
 * campaign stepped down through its signal while work runs on `term.signal`; or a pause.
 */
function genEdgeOp(rng: Prng, ctx: GenContext): FiberOp {
  const which = rng.weighted<'multi' | 'stepdown' | 'sleep'>([[5, 'multi'], [2, 'stepdown'], [1, 'sleep']]);
  if (which === 'sleep') return { kind: 'sleep', ms: rng.int(50, 400) };
  if (which === 'stepdown') return genStepDown(rng, ctx);
  const on = rng.weighted<EdgeBackend>([[3, 'postgres'], [3, 'zookeeper'], [2, 'redis'], [1.5, 'etcd']]);
  const backend = on === 'postgres' || on === 'zookeeper' ? on : undefined;
  const purpose: Purpose = on === 'redis' ? 'efficiency' : on === 'etcd' ? 'correctness' : rng.pick<Purpose>(['efficiency', 'correctness']);
  const n = rng.int(3, EDGE_KEYS);
  const others = Array.from({ length: EDGE_KEYS - 1 }, (_, i) => i + 1);
  const set = [0];
  while (set.length < n) set.push(...others.splice(rng.int(0, others.length - 1), 1));
  // In a random order: the library sorts them.
  const keys: number[] = [];
  while (set.length > 0) keys.push(...set.splice(rng.int(0, set.length - 1), 1));
  const sorted = [...keys].sort((a, b) => a - b);
  const kind = rng.weighted<LockOp['kind']>([[4, 'acquire'], [2, 'try'], [3, 'using']]);
  const ttl = rng.pick([1_000, 1_500, 2_500]);
  ctx.maxTtl = Math.max(ctx.maxTtl, ttl);
  const wait = kind === 'try' ? 0 : rng.pick([1_000, 3_000]);
  const op = withBackend<LockOp>({ kind, key: keys[0], keys, purpose, ttl, wait, steps: [] }, backend);
  if (kind !== 'try' && rng.chance(0.45)) {
    op.blocker = { key: sorted.at(-1)!, ms: rng.int(200, 1_200), ttl: 2_500 };
    ctx.maxTtl = Math.max(ctx.maxTtl, op.blocker.ttl);
  }
  if (rng.chance(0.6)) op.watch = { key: rng.chance(0.75) ? 0 : rng.pick(sorted.slice(0, -1)), holdMs: rng.int(200, 800), ttl: 1_000 };
  if (op.blocker && rng.chance(backend === 'postgres' ? 0.5 : 0.25)) {
    op.close = { afterMs: rng.int(0, 150), downMs: rng.int(50, 500) };
    // A long ttl: a key the close leaves behind outlives the close (a PostgreSQL row the shutdown
    // shortened was seen ~2 s shorter), so the runner can see it. Never on Redlock: its restart
    // delay is not concerned (plan.longTtl, not maxTtl).
    op.ttl = LONG_TTL;
    ctx.longTtl = LONG_TTL;
  }
  const steps = rng.int(1, 3);
  for (let i = 0; i < steps; i++) {
    const choice = rng.weighted<string>([[3, 'hold'], [1, 'extend'], [purpose === 'correctness' ? 2 : 0, 'rmw']]);
    if (choice === 'hold') op.steps.push({ s: 'hold', ms: rng.int(0, Math.floor(ttl * 0.3)) });
    else if (choice === 'extend') op.steps.push(genExtend(rng, ctx));
    else {
      // To k0's register (its first sorted key: an implicit token is found for it).
      const step: Step = { s: 'rmw', store: fencedStore(rng, op), token: kind === 'using' && rng.chance(0.5) ? 'implicit' : 'explicit', thinkMs: rng.int(0, 40), checkSignal: rng.chance(0.3), key: 0 };
      if (backend === 'postgres') step.tx = rng.chance(0.5);
      op.steps.push(step);
    }
  }
  return op;
}

/**
 * A campaign of the seed's leader name that steps down through its signal (aborted
 * `stepDownAfterMs` after the grant) while its work runs on `term.signal` — longer than that, so
 * the work must stop when the term ends; mostly with a rival candidate of this process waiting to lead next.
 */
function genStepDown(rng: Prng, ctx: GenContext): LockOp {
  const p = ctx.primitives!;
  const ttl = rng.pick([400, 700, 1_000, 1_500]);
  ctx.maxTtl = Math.max(ctx.maxTtl, ttl);
  const stepDownAfterMs = rng.int(100, 600);
  const op = withBackend<LockOp>({ kind: 'campaign', key: 0, ns: 'leader', purpose: p.leader.purpose, ttl, wait: 0, steps: [], stepDownAfterMs }, p.leader.backend);
  const fenced = p.leader.purpose === 'correctness';
  const work: Step = { s: 'work', ms: stepDownAfterMs + rng.int(200, 1_200) };
  if (fenced && rng.chance(0.6)) work.store = fencedStore(rng, op);
  op.steps.push(work);
  if (rng.chance(0.7)) {
    const steps: Step[] = [];
    if (fenced) steps.push({ s: 'rmw', store: fencedStore(rng, op), token: 'explicit', thinkMs: rng.int(0, 20), checkSignal: false });
    steps.push({ s: 'hold', ms: rng.int(100, 600) });
    op.rival = { steps };
  }
  return op;
}

function genExtend(rng: Prng, ctx: GenContext): Step {
  const t = rng.chance(0.3) ? rng.int(30, EXTEND_SHORT_MAX) : rng.pick(ctx.ttls);
  ctx.maxTtl = Math.max(ctx.maxTtl, t);
  return { s: 'extend', ttl: t };
}

/** One method of each shape, with the seed's purposes, backends, ttls and busy behaviour. */
function genCatalog(rng: Prng, ctx: GenContext): DecoSpec[] {
  return (['single', 'stacked', 'inherited', 'observable'] as const).map((shape) => {
    const purpose = ctx.control === 'unfenced' ? 'correctness' : rng.pick<Purpose>(['efficiency', 'correctness']);
    const two = shape === 'stacked' || shape === 'inherited';
    const purpose2 = two ? rng.pick<Purpose>(['efficiency', 'correctness']) : purpose;
    const ttl = rng.pick(ctx.ttls);
    ctx.maxTtl = Math.max(ctx.maxTtl, ttl);
    const onBusy = rng.weighted<DecoSpec['onBusy']>([[4, 'wait'], [1, 'throw'], [1, 'skip']]);
    const wait = onBusy === 'wait' ? rng.weighted([[3, 200], [3, 1_000], [2, 3_000]]) : 0;
    const spec: DecoSpec = { shape, purpose, purpose2, ttl, wait, onBusy };
    const backend = pickBackend(rng, ctx);
    if (backend) spec.backend = backend;
    const backend2 = two ? pickBackend(rng, ctx) : backend;
    if (backend2) spec.backend2 = backend2;
    // A Redlock declaration is efficiency (correctness there is refused at bootstrap).
    if (backend === 'redlock') spec.purpose = 'efficiency';
    if (backend2 === 'redlock') spec.purpose2 = 'efficiency';
    return spec;
  });
}

/**
 * A fifth of the locks each on PostgreSQL, ZooKeeper and Redlock (named per lock; Redlock ones
 * efficiency only), the rest routed by purpose; none in the controls.
 */
function pickBackend(rng: Prng, ctx: GenContext): LockBackendName | undefined {
  if (ctx.control) return undefined;
  return rng.weighted<LockBackendName | undefined>([[2, undefined], [1, 'postgres'], [1, 'zookeeper'], [1, 'redlock']]);
}

/** One lock: the same key on the same backend (named: whatever the purpose; routed: the same purpose, so the same backend). */
const sameLock = (a: { key: number; backend?: LockBackendName }, b: { key: number; backend?: LockBackendName }): boolean => a.key === b.key && a.backend === b.backend;

type LockRef = { key: number; purpose: Purpose; backend?: LockBackendName };

/**
 * The lock `lock` of a named backend (PostgreSQL, ZooKeeper, Redlock) is in the enclosing operation's
 * context with a purpose — its own lock, or a decorated call's second declaration — or undefined.
 * A nested call on it must use that purpose: the library refuses the other one there (one lock per
 * key whatever the purpose).
 */
function enclosingPurpose(ctx: GenContext, outer: LockOp | undefined, lock: { key: number; backend?: LockBackendName }): Purpose | undefined {
  if (!outer || lock.backend === undefined) return undefined;
  const held: LockRef[] = [outer];
  const spec = outer.deco ? ctx.decorated[outer.deco.method] : undefined;
  if (spec && outer.deco && (spec.shape === 'stacked' || spec.shape === 'inherited')) held.push({ key: outer.deco.key2, purpose: spec.purpose2, backend: spec.backend2 });
  return held.find((h) => sameLock(h, lock))?.purpose;
}

interface GenContext {
  keys: number;
  ttls: number[];
  control?: ControlMode;
  maxTtl: number;
  decorated: DecoSpec[];
  primitives?: Primitives;
  longTtl?: number;
}

function nominalMs(op: LockOp): number {
  return op.steps.reduce((sum, s) => sum + (s.s === 'hold' || s.s === 'work' ? s.ms : s.s === 'rmw' ? s.thinkMs + 20 : s.s === 'nest' ? nominalMs(s.op) : 10), 0);
}

function genFiberOp(rng: Prng, prim: Prng, ctx: GenContext): FiberOp {
  // A new primitive now and then (from its own stream: the other operations stay the same ones).
  if (ctx.primitives && prim.chance(0.2)) return genPrimitiveOp(prim, ctx);
  if (rng.chance(0.12)) return { kind: 'sleep', ms: rng.int(10, 400) };
  return genLockOp(rng, ctx, 0, undefined);
}

function genLockOp(rng: Prng, ctx: GenContext, depth: number, outer: LockOp | undefined): LockOp {
  const deco = ctx.decorated.length > 0 ? (depth > 0 ? 1.5 : 3) : 0;
  const kind =
    depth > 0
      ? rng.weighted<LockOp['kind']>([[6, 'using'], [2, 'try'], [2, 'acquire'], [deco, 'decorated']])
      : rng.weighted<LockOp['kind']>([[4, 'acquire'], [2, 'try'], [5, 'using'], [1, 'abort-wait'], [deco, 'decorated']]);
  if (kind === 'decorated') return genDecorated(rng, ctx, depth, outer);
  // Nested: the same lock (reentrant under using) or another one (another key, or the same key on
  // another backend).
  const reentrant = outer !== undefined && rng.chance(0.3);
  const key = reentrant ? outer.key : rng.int(0, ctx.keys - 1);
  const backend = reentrant ? outer.backend : pickBackend(rng, ctx);
  // One purpose per lock in one context (on a named backend the other purpose is the same lock);
  // a Redlock lock is always efficiency.
  const purpose: Purpose =
    backend === 'redlock'
      ? 'efficiency'
      : outer && sameLock({ key, backend }, outer)
        ? outer.purpose
        : enclosingPurpose(ctx, outer, { key, backend })
          ? enclosingPurpose(ctx, outer, { key, backend })!
          : ctx.control === 'unfenced'
            ? rng.weighted<Purpose>([[4, 'correctness'], [1, 'efficiency']])
            : rng.pick<Purpose>(['efficiency', 'correctness']);
  const ttl = rng.pick(ctx.ttls);
  ctx.maxTtl = Math.max(ctx.maxTtl, ttl);
  const wait = kind === 'try' ? 0 : rng.weighted([[1, 0], [3, 200], [3, 1_000], [2, 3_000]]);
  const op: LockOp = { kind, key, purpose, ttl, wait, steps: [] };
  if (backend) op.backend = backend;
  genSteps(rng, ctx, depth, op);
  return op;
}

/**
 * A call of a decorated method. Keys are arguments; a key the enclosing lease holds is used only
 * with that lease's purpose (another purpose on one key in one context is refused by design).
 */
function genDecorated(rng: Prng, ctx: GenContext, depth: number, outer: LockOp | undefined): LockOp {
  const method = rng.int(0, ctx.decorated.length - 1);
  const spec = ctx.decorated[method];
  const allowed = (k: number, purpose: Purpose, backend: LockBackendName | undefined): boolean =>
    (!outer || !sameLock({ key: k, backend }, outer) || purpose === outer.purpose) && (enclosingPurpose(ctx, outer, { key: k, backend }) ?? purpose) === purpose;
  const pickKey = (purpose: Purpose, backend: LockBackendName | undefined, not?: number): number | undefined => {
    const candidates = Array.from({ length: ctx.keys }, (_, k) => k).filter((k) => k !== not && allowed(k, purpose, backend));
    // Reentrant on the enclosing lock now and then, when the purposes and backends agree.
    if (outer && outer.purpose === purpose && outer.backend === backend && outer.key !== not && rng.chance(0.3)) return outer.key;
    // No key left (each is the first declaration's or held by the context with the other purpose).
    // Routed, that key is another lock (the other purpose's backend); on a named backend it is the
    // same lock, which the library refuses in this context.
    if (candidates.length === 0 && backend !== undefined) return undefined;
    return rng.pick(candidates.length ? candidates : [0]);
  };
  const key = pickKey(spec.purpose, spec.backend);
  if (key === undefined) {
    // This method cannot be called here (every key of its backend is held by the context with the
    // other purpose): a plain using() of the enclosing lock instead (reentrant).
    const op: LockOp = { kind: 'using', key: outer!.key, purpose: outer!.purpose, ttl: spec.ttl, wait: 200, steps: [] };
    if (outer!.backend) op.backend = outer!.backend;
    genSteps(rng, ctx, depth, op);
    return op;
  }
  let key2: number | undefined = key;
  if (spec.shape === 'stacked' || spec.shape === 'inherited') {
    // Two declarations on one key with different purposes can never both be held; stacked ones
    // always get two keys; an override may share its base's lock (a reentrant super call).
    const sameOk = spec.shape === 'inherited' && spec.purpose2 === spec.purpose && spec.backend2 === spec.backend && rng.chance(0.3);
    key2 = sameOk ? key : pickKey(spec.purpose2, spec.backend2, key);
  }
  if (key2 === undefined) {
    // This method cannot be called here: a plain using() of its first lock instead.
    const op: LockOp = { kind: 'using', key, purpose: spec.purpose, ttl: spec.ttl, wait: spec.onBusy === 'wait' ? spec.wait : 200, steps: [] };
    if (spec.backend) op.backend = spec.backend;
    genSteps(rng, ctx, depth, op);
    return op;
  }
  const call: DecoCall = { method, key2, repeat: spec.shape === 'observable' ? rng.weighted([[3, 1], [2, 2], [1, 3]]) : 1 };
  if (spec.shape === 'observable' && rng.chance(0.3)) call.unsubscribeAfterMs = rng.int(0, 800);
  const op: LockOp = { kind: 'decorated', deco: call, key, purpose: spec.purpose, ttl: spec.ttl, wait: spec.onBusy === 'wait' ? spec.wait : 0, steps: [] };
  if (spec.backend) op.backend = spec.backend;
  genSteps(rng, ctx, depth, op);
  return op;
}

function genSteps(rng: Prng, ctx: GenContext, depth: number, op: LockOp): void {
  const { purpose, ttl, kind } = op;
  if (kind === 'abort-wait') {
    op.wait = 3_000;
    op.abortAfterMs = rng.int(0, 600);
  }
  if ((kind === 'acquire' || kind === 'try') && rng.chance(0.05)) op.abandon = true;

  const steps = rng.int(1, depth > 0 ? 3 : 5);
  for (let i = 0; i < steps; i++) {
    const fenced = purpose === 'correctness';
    const choice = rng.weighted<string>([
      [3, 'hold'],
      [1.5, 'extend'],
      [fenced ? 4 : 0, 'rmw'],
      [depth === 0 && fenced ? 2.5 : 0, 'split'],
      [depth === 0 ? 1.5 : 0, 'nest'],
    ]);
    if (choice === 'hold') {
      // Mostly short, sometimes around or past the ttl.
      const ms = rng.chance(0.8) ? rng.int(0, Math.floor(ttl * 0.3)) : rng.int(Math.floor(ttl * 0.7), Math.floor(ttl * 1.4));
      op.steps.push({ s: 'hold', ms });
    } else if (choice === 'extend') {
      const t = rng.chance(0.3) ? rng.int(30, EXTEND_SHORT_MAX) : rng.pick(ctx.ttls);
      ctx.maxTtl = Math.max(ctx.maxTtl, t);
      op.steps.push({ s: 'extend', ttl: t });
    } else if (choice === 'rmw') {
      // A register is fenced by one lock's tokens: a PostgreSQL lease writes the PgFence register,
      // a ZooKeeper one its own EtcdFence register (their tokens and etcd's revisions are different
      // sequences), a routed one etcd's or Redis's.
      const step: Step = {
        s: 'rmw',
        store: fencedStore(rng, op),
        // An implicit token needs the lease in the async context: using() and decorated bodies.
        token: (kind === 'using' || kind === 'decorated') && ctx.control !== 'nolock' && rng.chance(0.5) ? 'implicit' : 'explicit',
        thinkMs: rng.chance(0.8) ? rng.int(0, 40) : rng.int(ttl / 2, ttl * 1.2),
        checkSignal: rng.chance(0.3),
      };
      if (op.backend === 'postgres') step.tx = rng.chance(0.5);
      op.steps.push(step);
    } else if (choice === 'split') {
      // Read under this lease, write from inside a nested lease of another key: the implicit
      // token there is the *nested* lease's. (PostgreSQL: each statement commits on its own — a
      // transaction kept open across a nested acquisition would hold the row lock while it waits.)
      const store = fencedStore(rng, op);
      const nested = genLockOp(rng, ctx, depth + 1, op);
      nested.kind = 'using';
      delete nested.deco;
      nested.wait = Math.max(nested.wait, 200);
      op.steps.push({ s: 'read', store });
      // The same holder must not update the register between its own read and write (that would
      // be the program's bug, not the lock's): a reentrant nested lease does no RMW of its own.
      if (sameLock(nested, op)) nested.steps = nested.steps.filter((s) => s.s !== 'rmw');
      // An implicit token is the one of the lease on the register's key in this async context: the
      // outer lease only if it is in the context (using). Under acquire/try, a nested re-acquisition
      // of the same key would lend its newer token to a read made under the older lease — the
      // program's bug (read and write under different leases), which no fence can see.
      const token = ctx.control !== 'nolock' && (kind === 'using' || kind === 'decorated') && rng.chance(0.6) ? 'implicit' : 'explicit';
      const at = rng.int(0, nested.steps.length);
      nested.steps.splice(at, 0, { s: 'write-outer', store, token });
      // Often linger first, around the *outer* ttl: the outer lease may end before the write.
      if (rng.chance(0.5)) nested.steps.splice(at, 0, { s: 'hold', ms: rng.int(Math.floor(ttl * 0.5), Math.floor(ttl * 1.5)) });
      op.steps.push({ s: 'nest', op: nested });
    } else {
      op.steps.push({ s: 'nest', op: genLockOp(rng, ctx, depth + 1, op) });
    }
  }
}

/** The register a correctness lease fences: its named backend's, or etcd's or Redis's when routed (a Redlock lease is never correctness). */
const fencedStore = (rng: Prng, op: LockOp): Store =>
  op.backend === 'postgres' || op.backend === 'mysql' || op.backend === 'zookeeper' ? op.backend : rng.pick<Store>(['etcd', 'redis']);

/** Faults at seeded times; at most one per resource at a time (one etcd member down: quorum stays). */
function genFaults(rng: Prng, params: SimParams, sessionTtlSeconds: number, maxTtl: number): Fault[] {
  const D = params.durationMs;
  const count = params.control === 'nolock' ? 2 : Math.max(2, Math.round(D / 1_300));
  const busy = new Map<string, number>();
  const faults: Fault[] = [];
  const session = sessionTtlSeconds * 1_000;
  // The negative controls take no lock on PostgreSQL, ZooKeeper or Redlock: no fault there (their schedules are what they were before them).
  const pg = params.control === undefined ? 1 : 0;
  for (let i = 0; i < count; i++) {
    const kind = rng.weighted<Exclude<FaultKind, `my-${string}`>>(
      params.control === 'unfenced'
        ? [[1, 'pause-holder']]
        : [
            [3, 'delay'],
            [2, 'blackhole'],
            [3, 'pause'],
            [3, 'pause-holder'],
            [1.5, 'redis-kill'],
            [2, 'etcd-kill'],
            [1.5 * pg, 'pg-kill'],
            [1 * pg, 'pg-restart'],
            [1 * pg, 'pg-terminate'],
            [1.5 * pg, 'zk-kill'],
            [1 * pg, 'zk-pause'],
            [3 * pg, 'redlock-kill'],
            [1.5 * pg, 'redlock-pause'],
            [2.5, 'app-restart'],
            [1, 'worker-crash'],
          ],
    );
    const worker = rng.int(0, params.workers - 1);
    let at = rng.int(Math.floor(D * 0.05), Math.floor(D * 0.8));
    let fault: Fault;
    switch (kind) {
      case 'delay': {
        const ms = rng.pick([30, 150, 400, 900, 1_800]);
        fault = { kind, at, worker, ms, dur: rng.int(500, 2_500), targets: targets(rng, pg > 0) };
        break;
      }
      case 'blackhole':
        fault = { kind, at, worker, dur: rng.int(300, 3_000), targets: targets(rng, pg > 0) };
        break;
      case 'pause':
        fault = { kind, at, worker, dur: rng.int(200, Math.max(session + 800, 3_000)) };
        break;
      case 'pause-holder':
        fault = { kind, at, dur: rng.pick([0.5, 1.5, 3]) * rng.pick([700, 1_000, 1_500]) };
        break;
      case 'redis-kill':
        fault = { kind, at, dur: rng.int(100, 1_500) };
        break;
      case 'etcd-kill':
        fault = { kind, at, member: rng.chance(0.5) ? 'leader' : rng.int(0, 2), dur: rng.int(300, 2_500) };
        break;
      case 'pg-kill':
        fault = { kind, at, dur: rng.int(100, 1_500) };
        break;
      case 'pg-restart':
        fault = { kind, at, dur: 1_000 };
        break;
      case 'pg-terminate':
        fault = { kind, at, dur: 0 };
        break;
      case 'zk-kill':
        fault = { kind, at, dur: rng.int(100, 1_500) };
        break;
      case 'zk-pause':
        // Within the session timeout (sessions survive), or past it (they expire on resume).
        fault = { kind, at, dur: rng.int(300, session + 1_000) };
        break;
      case 'redlock-kill': {
        // Mostly a minority (the lock keeps working on the others); now and then a majority.
        const down = rng.weighted([[3, 1], [4, 2], [1, 3]]);
        // Restarted empty only once every lease those masters knew has ended (README: keep a
        // restarted master out for at least the longest ttl), with 500 ms to spare.
        const dur = rng.int(maxTtl + 500, maxTtl + 1_500);
        // A long fault: drawn late, it starts earlier rather than not fit in the run.
        at = Math.min(at, Math.floor(D * 0.9) - dur);
        fault = { kind, at, masters: pickMasters(rng, down), dur };
        break;
      }
      case 'redlock-pause':
        fault = { kind, at, masters: pickMasters(rng, rng.int(1, 2)), dur: rng.int(200, 3_000) };
        break;
      case 'app-restart':
        fault = { kind, at, worker, dur: rng.int(50, 1_000) };
        break;
      case 'worker-crash':
        fault = { kind, at, worker, dur: rng.int(100, 1_000) };
        break;
    }
    // Slide past a busy resource; drop what no longer fits before 90 % of the run.
    const resource = faultResource(fault);
    at = Math.max(at, (busy.get(resource) ?? 0) + 100);
    if (at + fault.dur > D * 0.9) continue;
    fault.at = at;
    // What comes back after the fault takes time of its own (elections, crash recovery, a new process).
    // Redlock: the clients reconnect to a restarted or resumed master.
    const recovery = ['etcd-kill', 'worker-crash', 'app-restart', 'pg-kill', 'pg-restart', 'zk-kill'].includes(kind)
      ? 1_500
      : ['pg-terminate', 'zk-pause', 'redlock-kill', 'redlock-pause'].includes(kind)
        ? 500
        : 0;
    busy.set(resource, at + fault.dur + recovery);
    faults.push(fault);
  }
  return faults.sort((a, b) => a.at - b.at);
}

/** What a fault holds while it lasts: one fault per resource at a time (the runner waits for the previous one, in real time too). */
export function faultResource(fault: Fault): string {
  switch (fault.kind) {
    case 'delay':
    case 'blackhole':
      return `net${fault.worker}`;
    case 'pause':
    case 'app-restart':
    case 'worker-crash':
      return `proc${fault.worker}`;
    case 'pause-holder':
      return 'holder';
    case 'redis-kill':
      return 'redis';
    case 'etcd-kill':
      return 'etcd';
    case 'pg-kill':
    case 'pg-restart':
    case 'pg-terminate':
      return 'postgres';
    case 'zk-kill':
    case 'zk-pause':
      return 'zookeeper';
    case 'redlock-kill':
    case 'redlock-pause':
      return 'redlock';
    case 'my-kill':
    case 'my-restart':
    case 'my-kill-sessions':
    case 'my-pause':
      return 'mysql';
  }
}

/** `count` distinct masters of the five, in ascending order. */
function pickMasters(rng: Prng, count: number): number[] {
  const left = Array.from({ length: REDLOCK_MASTERS }, (_, i) => i);
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(...left.splice(rng.int(0, left.length - 1), 1));
  return out.sort((a, b) => a - b);
}

function targets(rng: Prng, pg: boolean): ProxyTarget[] {
  if (!pg) {
    return rng.weighted<ProxyTarget[]>([
      [3, ['redis', 'etcd', 'register']],
      [1, ['redis']],
      [1, ['etcd']],
      [1, ['register']],
      [1, ['etcd', 'register']],
    ]);
  }
  return rng.weighted<ProxyTarget[]>([
    [3, ['redis', 'etcd', 'postgres', 'zookeeper', 'redlock', 'register']],
    [1, ['redis']],
    [1, ['etcd']],
    [1, ['postgres']],
    [1, ['zookeeper']],
    [1, ['register']],
    [1, ['etcd', 'register']],
    [1, ['postgres', 'register']],
    [1, ['zookeeper', 'register']],
    [1, ['redlock']],
  ]);
}

const masterNames = (masters: number[]): string => masters.map((m) => `m${m + 1}`).join(',');

/** A line per fault, for logs and the replay message. */
export function describeFault(fault: Fault & { index?: number }): string {
  const id = fault.index === undefined ? '' : `#${fault.index} `;
  const at = `@${(fault.at / 1000).toFixed(2)}s`;
  switch (fault.kind) {
    case 'delay':
      return `${id}${at} delay ${fault.ms} ms w${fault.worker} [${fault.targets.join(',')}] for ${fault.dur} ms`;
    case 'blackhole':
      return `${id}${at} blackhole w${fault.worker} [${fault.targets.join(',')}] for ${fault.dur} ms`;
    case 'pause':
      return `${id}${at} SIGSTOP w${fault.worker} for ${fault.dur} ms`;
    case 'pause-holder':
      return `${id}${at} SIGSTOP the next reader for ${fault.dur} ms`;
    case 'redis-kill':
      return `${id}${at} kill -9 redis-server, restart after ${fault.dur} ms`;
    case 'etcd-kill':
      return `${id}${at} kill -9 etcd ${fault.member === 'leader' ? 'leader' : `member n${fault.member + 1}`}, restart after ${fault.dur} ms`;
    case 'pg-kill':
      return `${id}${at} kill -9 postgres, relaunch after ${fault.dur} ms`;
    case 'pg-restart':
      return `${id}${at} fast restart of postgres`;
    case 'pg-terminate':
      return `${id}${at} pg_terminate_backend() of every postgres session`;
    case 'zk-kill':
      return `${id}${at} kill -9 zookeeper, restart after ${fault.dur} ms`;
    case 'zk-pause':
      return `${id}${at} SIGSTOP zookeeper for ${fault.dur} ms`;
    case 'redlock-kill':
      return `${id}${at} kill -9 redlock ${masterNames(fault.masters)} (${fault.masters.length} of ${REDLOCK_MASTERS}), restart empty after ${fault.dur} ms`;
    case 'redlock-pause':
      return `${id}${at} SIGSTOP redlock ${masterNames(fault.masters)} for ${fault.dur} ms`;
    case 'my-kill':
      return `${id}${at} kill -9 mariadb, relaunch after ${fault.dur} ms`;
    case 'my-restart':
      return `${id}${at} restart of mariadb`;
    case 'my-kill-sessions':
      return `${id}${at} KILL of every mariadb session`;
    case 'my-pause':
      return `${id}${at} SIGSTOP mariadb for ${fault.dur} ms`;
    case 'app-restart':
      return `${id}${at} app.close() w${fault.worker}, new app after ${fault.dur} ms`;
    case 'worker-crash':
      return `${id}${at} kill -9 worker w${fault.worker}, new process after ${fault.dur} ms`;
  }
}
