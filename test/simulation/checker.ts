/**
 * The simulation's checker. Pure: the workers' event log (wall-clock times from one machine's
 * clock), the final register values, the liveness probe's answers and how each worker ended go
 * in; violations of the five invariants and figures come out. Unit-tested with synthetic logs in
 * checker.spec.ts, each kind of violation included.
 *
 * A lock is `purpose:key` on the routed backends (efficiency: Redis, correctness: etcd),
 * `postgres:key` on PostgreSQL, `mysql:key` on MySQL and `zookeeper:key` on ZooKeeper, where a key is one lock whatever
 * the purpose (one lease row, one line of znodes): its efficiency and correctness leases must
 * exclude each other, and its tokens (every lease there has one) form one sequence; and
 * `redlock:key` on Redlock — one lock per key, efficiency only, no tokens (invariant 1 applies,
 * invariant 3 does not).
 *
 * 1. Mutual exclusion: never two unended leases with time left on one lock. A lease's interval
 *    is [grant received, min(signal aborted, release called, the latest validity end the holder
 *    was told)] — the validity end comes from remainingMs() at grant, while an extend() is in
 *    flight, after it, and at every step (Date-calibrated clock + remainingMs); a later, shorter
 *    answer replaces a longer one. A paused holder's interval ends at its validity, not when it
 *    learns it lost the lease.
 * 2. Fenced registers: no acknowledged element missing from the final value, no element twice,
 *    nothing in it that a write was told was refused, tokens in append order never decreasing.
 * 3. Fencing tokens per lock (correctness; not Redlock's, which has none): unique, and a grant
 *    requested after another was received carries a higher token; a reentrant handle carries its
 *    outer lease's token.
 * 4. Liveness: every lock can be acquired by a fresh instance within ttl + session ttl (+ slack)
 *    of the last worker being gone; no worker's calls hang past the drain deadline.
 * 5. No unbounded growth: per-owner collections of the service and backends empty once nothing
 *    is held; no handle or timer keeps a closed app's process alive.
 *
 * The newer primitives:
 * - Semaphores (`sem/…` locks, `permits` > 1): invariant 1 becomes *at most `permits` leases
 *   believed valid at once* (`over-admission`); invariant 3 as for any lock (each holder its own
 *   token, above every token received before it was requested).
 * - Multi-key leases: one lease, a holder of each of its keys — invariant 1 and 3 per key with the
 *   lease's one interval and token (the largest of its keys').
 * - Leaders (`leader/…`, `campaign()`): a lock like any other — no two leaders valid at once.
 * - list() by an operator (with the lock's name as its prefix): a lease believed valid over the
 *   whole call is in its answer (`list-missed`; Redlock excepted, see the check).
 * - forceRelease() by an operator: a lease held when a call that (maybe) ended it began is, on
 *   that lock, over at that moment — its holder may learn later (paused, partitioned; Redlock at
 *   its next renewal), and then only the fence guards the resource: a stale write it lets in is
 *   still `stale-accepted` (invariant 2). Never told is a violation: an `extend()` asked after the
 *   call returned that succeeds (`force-not-told`).
 *
 * - MySqlTransactionLock holders (`xact`, on `mysql:key`): a holder like a lease for invariants 1
 *   and 3 — its token in the MySQL leases' sequence, above every grant received before it was
 *   requested — with no ttl: believed valid from its grant until its COMMIT / ROLLBACK is sent or its
 *   connection closed (`rel`), a statement of it failed (`lost`, from when that statement was sent),
 *   or its session ended without its say (`sessionEnds`: the server killed, restarted, its sessions
 *   KILLed; its worker killed). A write it did not commit (`rolledback`) must not be in the register.
 *   forceRelease() never ends it, list() never names it (not a lease).
 *
 * The edge fiber's operations (plan.ts `edge`):
 * - A watcher forceRelease()s a key of a multi-key lease while its acquisition takes the keys one
 *   by one (the backend showed the key held by the attempt's owner `<owner>.<gen>-<index>`), then
 *   takes the key itself. A lease of that owner and generation granted after the call returned holds
 *   a key it lost on the way: believed valid at all, it is `forced-key-granted`; and valid beside the
 *   watcher's own lease on that key, an `overlap`.
 * - A campaign stepped down through its signal while work runs on `term.signal`: the work's interval
 *   is the leader's belief until `term.signal` aborts or the work ends, whatever `remainingMs()`
 *   said; overlapping the next leader only through that work is `stepped-down-working`.
 * - After a worker's `app.close()` returned, a key one of that app's owners still held (seen twice
 *   by the runner's own app) is `held-after-close` (invariant 5), unless a fault on that backend or
 *   the worker's way to it overlapped the close (the release could not get through: its ttl ends it).
 */
import type { ControlMode, KeyNs, LockBackendName, Purpose } from './plan.js';
import { isKeyCache, type RegisterList, type SimEvent } from './protocol.js';

export type Invariant = 1 | 2 | 3 | 4 | 5;

export interface Violation {
  invariant: Invariant;
  kind: string;
  /** `purpose:key`, or `store:key` for registers. */
  lock?: string;
  detail: string;
  /** Wall-clock time the problem starts, when there is one. */
  at?: number;
}

export interface WorkerEnd {
  w: number;
  inc: number;
  /** crashed: killed on purpose (kill -9 fault or end crash), so no drain/exit report is due. */
  how: 'exit' | 'crashed';
  drained: boolean;
  exitCode: number | null;
  signal: string | null;
  /** The end of what it wrote to stderr (the runner keeps the last 4 KB). */
  stderr?: string;
}

export interface CheckInput {
  events: SimEvent[];
  /** From the probe: final register values (null: never written). */
  registers: Array<{ store: string; key: number; ns?: KeyNs; list: RegisterList | null }>;
  /** Liveness probe answers; undefined if the probe did not run. */
  probes?: Array<{ key: number; purpose: Purpose; backend?: LockBackendName; ns?: KeyNs; ok: boolean; elapsedMs: number; message?: string }>;
  /** Per lock (`purpose:key`, `postgres:key`, `mysql:key`, `zookeeper:key`, `redlock:key`): how long after the last worker was gone a fresh instance must get it, ms. */
  livenessBoundMs: Record<string, number>;
  workers: WorkerEnd[];
  /** Slack for comparing times taken in different processes, ms. */
  toleranceMs: number;
  /** Keys in the plan (bounds per-key caches). */
  keys: number;
  control?: ControlMode;
  /**
   * When a worker process was stopped (SIGSTOP faults, from just before the stop to just after
   * the continue): work on a term's signal does nothing then, so it believes nothing past its
   * validity — its signal aborts when the process runs again.
   */
  paused?: Array<{ w: number; start: number; end: number }>;
  /**
   * When MySQL sessions ended without their clients' say: mariadbd killed or restarted, every
   * session KILLed (no `w`), or a worker process killed (`w`: its sessions). A transaction holder
   * (`xact`) of that worker — of any, without `w` — holds its key only until then. `until`: the
   * sessions ended somewhere from `at` to then (a KILL of each in turn, a shutdown): a holder granted
   * meanwhile may have lost its session at once.
   */
  sessionEnds?: Array<{ at: number; until?: number; w?: number; why: string }>;
}

export interface Interval {
  id: string;
  lock: string;
  w: number;
  /** Grant received. */
  start: number;
  /** End of the last believed-valid segment. */
  end: number;
  token?: string;
  segments: Array<[number, number]>;
  /** A semaphore holder: its permits. */
  permits?: number;
  /** Where a forceRelease() ended it on this lock (the call's start), if one did. */
  forcedAt?: number;
  /** A term with work on term.signal: its believed segments without the work (what remainingMs() said). */
  claimSegments?: Array<[number, number]>;
  /** A MySqlTransactionLock holder's. */
  xact?: boolean;
}

export interface CheckStats {
  ops: number;
  grants: number;
  reentrantGrants: number;
  /** Calls of decorated methods, and the grants their declarations took (both leases of a stacked one, each subscription's). */
  decorated: { calls: number; grants: number };
  busy: number;
  failures: Record<string, number>;
  lost: Record<string, number>;
  extends: { ok: number; failed: number };
  writes: Record<string, number>;
  reads: Record<string, number>;
  /** Writes acknowledged although the writer's lease on that lock had already ended (the fence let them in; fine unless something was lost). */
  writesAfterLeaseEnd: number;
  /** Slowest liveness probe: ms after the last worker was gone, and its bound. */
  livenessMaxMs?: number;
  /** Why calls failed and writes were refused or of unknown outcome (messages with numbers and names masked). */
  reasons: Record<string, number>;
  /** Overlaps of a paused/late holder's *awareness* with a successor (not violations: the interval ends at the validity). */
  maxOverlapMs: number;
  /** The PostgreSQL part: leases granted there (reentrant handles included) and PgFence register writes by outcome. */
  postgres: { grants: number; writes: Record<string, number> };
  /**
   * The MySQL part: grants there (leases, reentrant handles and transaction holders), MySqlFence
   * register writes by outcome, and the MySqlTransactionLock holders: calls, grants, busy, failed,
   * how the held ones ended (commit, rollback, destroy as planned; `lost`: a statement failed),
   * and `cut`: of those, the ones a session end — the server's, the worker killed — ended before.
   */
  mysql: { grants: number; writes: Record<string, number>; xact: { calls: number; grants: number; busy: number; failed: number; ends: Record<string, number>; cut: number } };
  /** The ZooKeeper part: leases granted there and writes to its (EtcdFence) register by outcome. */
  zookeeper: { grants: number; writes: Record<string, number> };
  /** The Redlock part: leases granted there (efficiency only: no register, no tokens). */
  redlock: { grants: number };
  /** Semaphore leases granted, and the most holders believed valid at once on one semaphore. */
  sem: { grants: number; maxHolders: number };
  /** Multi-key leases granted. */
  multi: { grants: number };
  /** Leader terms granted (campaign()). */
  leader: { grants: number };
  /**
   * forceRelease() calls: answered true / false / failed (outcome unknown); leases they ended
   * (held when the call began); of those, told (signal aborted, reason force-released) and the
   * longest time from the call's answer to the holder being told.
   */
  force: { calls: number; released: number; free: number; failed: number; forced: number; told: number; maxTellMs: number; requeued: number };
  /** An operator's list() calls: answered with the lock listed / not listed / failed. */
  list: { calls: number; listed: number; unlisted: number; failed: number };
  /** The watcher: watches started, fired (a multi-key owner seen on the key, then forceRelease() of it), and of those answered true. */
  watch: { watches: number; fired: number; released: number };
  /** Campaigns stepped down through their signal, and how their work on term.signal ended: by the signal, by its own time, by the drain. */
  stepdown: { terms: number; bySignal: number; byTime: number; byDrain: number };
  /** After an app.close(): closes looked at, keys looked at (and unanswered), keys held by the closed app's owners — excused by a fault or not. */
  closed: { closes: number; keys: number; failed: number; held: number; excused: number };
}

export interface CheckResult {
  violations: Violation[];
  stats: CheckStats;
  intervals: Interval[];
}

/**
 * The lock a lease is on: `purpose:key` when routed by purpose, `backend:key` on a backend named
 * per lock (PostgreSQL, ZooKeeper: both purposes, one lock per key; Redlock: efficiency only).
 */
export const lockId = (purpose: string, key: number, backend?: string, ns?: string): string => `${ns ? `${ns}/` : ''}${backend ? `${backend}:${key}` : `${purpose}:${key}`}`;
/** The locks a lease holds: every key of a multi-key lease. */
const locksOf = (e: { purpose: string; key: number; backend?: string; ns?: string; keys?: number[] }): string[] =>
  e.keys ? e.keys.map((k) => lockId(e.purpose, k, e.backend, e.ns)) : [lockId(e.purpose, e.key, e.backend, e.ns)];
/** Every lease of a lock on a named backend has a token, whatever its purpose: one sequence per key. */
const NAMED = /^(?:\w+\/)?(postgres|mysql|zookeeper):/;
/** A register: `store:key`, or `store:ns/key` for a key of another namespace (the leader's). */
export const registerId = (store: string, key: number, ns?: string): string => `${store}:${ns ? `${ns}/` : ''}${key}`;
const EXPECTED_FAILURES = new Set(['LockBusyError', 'LockBackendUnavailableError', 'LeaseLostError', 'AbortError', 'Error']);

interface LeaseTrack {
  id: string;
  lock: string;
  /** Every lock it holds (a multi-key lease: one per key). */
  locks: string[];
  permits?: number;
  lostReason?: string;
  /** extend() calls: asked at, and answered ok at (if it was). */
  exts: Array<{ reqT: number; okT?: number }>;
  purpose: Purpose;
  w: number;
  start: number;
  token?: string;
  /** What the holder was told, in order: at t, valid until V (undefined: nothing left). */
  claims: Array<{ t: number; V?: number }>;
  lostT?: number;
  relT?: number;
  reqT?: number;
  /** A multi-key lease: its engine owner id and the generation its keys were taken in. */
  owner?: string;
  gen?: number;
  /** A watched multi-key lease: who the backend showed holding the watched lock right after the grant. */
  heldAfter?: Map<string, string | undefined>;
  /** Work on term.signal (a stepped-down campaign's): from, to (undefined: no end seen), and why it ended. */
  work: Array<{ start: number; end?: number; why?: string }>;
  /** When its campaign's signal was aborted (stepping down). */
  stepDownT?: number;
  /** A MySqlTransactionLock holder: no ttl, believed from its grant until its end (relT, lostT, a session end). */
  xact?: boolean;
}

/**
 * The times a holder believed its lease valid: each claim holds from when it was made until its
 * V or the next claim (a later, shorter answer — an extend to a smaller ttl — replaces it), and
 * everything stops at the loss signal or the release.
 */
export function believedValid(lease: Pick<LeaseTrack, 'claims' | 'lostT' | 'relT'>): Array<[number, number]> {
  const cut = Math.min(lease.lostT ?? Infinity, lease.relT ?? Infinity);
  const segments: Array<[number, number]> = [];
  lease.claims.forEach((c, i) => {
    if (c.V === undefined) return;
    const next = lease.claims[i + 1]?.t ?? Infinity;
    const end = Math.min(c.V, next, cut);
    if (end <= c.t) return;
    const last = segments[segments.length - 1];
    if (last && last[1] >= c.t) last[1] = Math.max(last[1], end);
    else segments.push([c.t, end]);
  });
  return segments;
}

export function check(input: CheckInput): CheckResult {
  const violations: Violation[] = [];
  const events = [...input.events].sort((a, b) => a.t - b.t);
  const stats: CheckStats = {
    ops: 0,
    grants: 0,
    reentrantGrants: 0,
    decorated: { calls: 0, grants: 0 },
    busy: 0,
    failures: {},
    lost: {},
    extends: { ok: 0, failed: 0 },
    writes: {},
    reads: {},
    writesAfterLeaseEnd: 0,
    maxOverlapMs: 0,
    reasons: {},
    postgres: { grants: 0, writes: {} },
    mysql: { grants: 0, writes: {}, xact: { calls: 0, grants: 0, busy: 0, failed: 0, ends: {}, cut: 0 } },
    zookeeper: { grants: 0, writes: {} },
    redlock: { grants: 0 },
    sem: { grants: 0, maxHolders: 0 },
    multi: { grants: 0 },
    leader: { grants: 0 },
    force: { calls: 0, released: 0, free: 0, failed: 0, forced: 0, told: 0, maxTellMs: 0, requeued: 0 },
    list: { calls: 0, listed: 0, unlisted: 0, failed: 0 },
    watch: { watches: 0, fired: 0, released: 0 },
    stepdown: { terms: 0, bySignal: 0, byTime: 0, byDrain: 0 },
    closed: { closes: 0, keys: 0, failed: 0, held: 0, excused: 0 },
  };
  const reason = (what: string, message: string | undefined): void => {
    const masked = `${what}: ${(message ?? '').replace(/"[^"]*"/g, '"…"').replace(/\d+/g, 'N').slice(0, 90)}`;
    stats.reasons[masked] = (stats.reasons[masked] ?? 0) + 1;
  };

  // ---- leases, per worker stream order (a worker's events arrive in the order it sent them)
  const reqT = new Map<string, number>();
  const decoratedIds = new Set<string>();
  const xactIds = new Set<string>();
  const leases = new Map<string, LeaseTrack>();
  const ended = (l: LeaseTrack): boolean => l.lostT !== undefined || l.relT !== undefined;
  const forces = new Map<string, { id: string; lock: string; start: number; end?: number; released?: boolean; owner?: string; watch?: string }>();
  const lists = new Map<string, { lock: string; start: number; end?: number; listed?: boolean }>();
  /** Per watched request: whether the forced owner's attempt held its last key right after the call (see the 'watch' event). */
  const watchComplete = new Map<string, boolean | undefined>();
  for (const e of input.events) {
    switch (e.ev) {
      case 'req':
        stats.ops += 1;
        reqT.set(e.id, e.t);
        if (e.kind === 'decorated') stats.decorated.calls += 1;
        if (e.kind.startsWith('decorated')) decoratedIds.add(e.id);
        if (e.kind === 'xact') {
          xactIds.add(e.id);
          stats.mysql.xact.calls += 1;
        }
        break;
      case 'grant': {
        stats.grants += 1;
        if (e.backend) stats[e.backend].grants += 1;
        if (decoratedIds.has(e.id)) stats.decorated.grants += 1;
        if (e.permits !== undefined && e.permits > 1) stats.sem.grants += 1;
        if (e.keys) stats.multi.grants += 1;
        if (e.ns === 'leader') stats.leader.grants += 1;
        if (!e.reentrant) {
          const locks = locksOf(e);
          const lease: LeaseTrack = { id: e.id, lock: locks[0], locks, purpose: e.purpose, w: e.w, start: e.t, token: e.token, claims: [{ t: e.t, V: e.V }], reqT: reqT.get(e.id), exts: [], work: [] };
          if (e.permits !== undefined && e.permits > 1) lease.permits = e.permits;
          if (e.owner !== undefined) lease.owner = e.owner;
          if (e.gen !== undefined) lease.gen = e.gen;
          if (e.xact) {
            // No ttl: valid until its transaction ends (cut below).
            lease.xact = true;
            lease.claims = [{ t: e.t, V: Infinity }];
            stats.mysql.xact.grants += 1;
          }
          leases.set(e.id, lease);
          if (e.purpose === 'correctness' && e.token === undefined) {
            violations.push({ invariant: 3, kind: 'missing-token', lock: lease.lock, detail: `${e.id}: a correctness lease without a fencing token`, at: e.t });
          }
          break;
        }
        stats.reentrantGrants += 1;
        const root = leases.get(e.root);
        if (!root) {
          violations.push({ invariant: 1, kind: 'reentrant-unknown-outer', lock: locksOf(e)[0], detail: `${e.id}: reentrant handle whose outer lease (${e.root}) was never granted here`, at: e.t });
          break;
        }
        if (ended(root)) {
          violations.push({
            invariant: 1,
            kind: 'reentrant-after-end',
            lock: root.lock,
            detail: `${e.id}: reentrant handle granted on ${root.id} after it ${root.lostT !== undefined ? 'was lost' : 'was released'}`,
            at: e.t,
          });
        } else {
          root.claims.push({ t: e.t, V: e.V });
        }
        if (e.token !== root.token) {
          violations.push({ invariant: 3, kind: 'reentrant-token', lock: root.lock, detail: `${e.id}: reentrant token ${e.token} differs from its outer lease's ${root.token} (${root.id})`, at: e.t });
        }
        break;
      }
      case 'sample':
      case 'ext-ok': {
        const lease = leases.get(e.id);
        if (e.ev === 'ext-ok') {
          stats.extends.ok += 1;
          const pending = lease?.exts.findLast((x) => x.okT === undefined);
          if (pending) pending.okT = e.t;
        }
        if (lease && !ended(lease)) lease.claims.push({ t: e.t, V: e.V });
        break;
      }
      case 'ext-req':
        leases.get(e.id)?.exts.push({ reqT: e.t });
        break;
      case 'held-check': {
        const lease = leases.get(e.id);
        if (lease && !e.failed) (lease.heldAfter ??= new Map()).set(lockId(e.purpose, e.key, e.backend, e.ns), e.owner);
        break;
      }
      case 'force':
        stats.force.calls += 1;
        forces.set(e.id, { id: e.id, lock: lockId(e.purpose, e.key, e.backend, e.ns), start: e.t, ...(e.watch ? { watch: e.watch } : {}) });
        break;
      case 'watch':
        if (e.phase === 'start') stats.watch.watches += 1;
        else if (e.fired) {
          stats.watch.fired += 1;
          watchComplete.set(e.target, e.complete);
        }
        break;
      case 'stepdown': {
        stats.stepdown.terms += 1;
        const lease = leases.get(e.id);
        if (lease) lease.stepDownT = e.t;
        break;
      }
      case 'work': {
        const lease = leases.get(e.id);
        if (!lease) break;
        if (e.phase === 'start') lease.work.push({ start: e.t });
        else {
          const open = lease.work.findLast((x) => x.end === undefined);
          if (open) {
            open.end = e.t;
            open.why = e.why;
          }
          if (lease.stepDownT !== undefined) {
            if (e.why === 'signal') stats.stepdown.bySignal += 1;
            else if (e.why === 'drain') stats.stepdown.byDrain += 1;
            else stats.stepdown.byTime += 1;
          }
        }
        break;
      }
      case 'closed-held':
        stats.closed.held += 1;
        if (e.excused) {
          stats.closed.excused += 1;
          break;
        }
        violations.push({
          invariant: 5,
          kind: 'held-after-close',
          lock: `${e.backend}:${e.key}`,
          detail:
            `w${e.w}.${e.inc}: ${e.key} on ${e.backend} was still held by ${e.owner}, an owner of the app whose close() returned at ${fmt(e.closedAt)} — ` +
            `seen again ${e.recheckMs} ms later, ${Math.round(e.remainingMs)} ms of it left`,
          at: e.t,
        });
        break;
      case 'close-inspected':
        stats.closed.closes += 1;
        stats.closed.keys += e.keys;
        stats.closed.failed += e.failed;
        break;
      case 'list':
        stats.list.calls += 1;
        lists.set(e.id, { lock: lockId(e.purpose, e.key, e.backend, e.ns), start: e.t });
        break;
      case 'list-done': {
        const call = lists.get(e.id);
        if (call) {
          call.end = e.t;
          call.listed = e.listed;
        }
        if (e.listed === true) stats.list.listed += 1;
        else if (e.listed === false) stats.list.unlisted += 1;
        else stats.list.failed += 1;
        break;
      }
      case 'force-done': {
        const f = forces.get(e.id);
        if (f) {
          f.end = e.t;
          f.released = e.released;
          if (e.owner !== undefined) f.owner = e.owner;
          if (f.watch && e.released === true) stats.watch.released += 1;
        }
        if (e.released === true) stats.force.released += 1;
        else if (e.released === false) stats.force.free += 1;
        else {
          stats.force.failed += 1;
          reason('force failed', e.message);
        }
        break;
      }
      case 'ext-fail':
        stats.extends.failed += 1;
        break;
      case 'lost': {
        const lease = leases.get(e.id);
        if (lease && lease.lostT === undefined) {
          lease.lostT = Math.min(e.since ?? e.t, e.t);
          lease.lostReason = e.reason;
        }
        if (lease?.xact && lease.relT === undefined) stats.mysql.xact.ends.lost = (stats.mysql.xact.ends.lost ?? 0) + 1;
        stats.lost[e.reason] = (stats.lost[e.reason] ?? 0) + 1;
        break;
      }
      case 'rel': {
        const lease = leases.get(e.id);
        if (lease && lease.relT === undefined) lease.relT = e.t;
        if (lease?.xact && e.how && lease.lostT === undefined) stats.mysql.xact.ends[e.how] = (stats.mysql.xact.ends[e.how] ?? 0) + 1;
        break;
      }
      case 'busy':
        stats.busy += 1;
        if (xactIds.has(e.id)) stats.mysql.xact.busy += 1;
        break;
      case 'unlocked':
        violations.push({ invariant: 1, kind: 'ran-unlocked', detail: `${e.id}: a decorated body ran without its lock: ${e.detail}`, at: e.t });
        break;
      case 'fail':
        stats.failures[e.name] = (stats.failures[e.name] ?? 0) + 1;
        if (xactIds.has(e.id)) stats.mysql.xact.failed += 1;
        reason(`fail ${e.name}`, e.message);
        break;
      case 'read':
        stats.reads[e.result] = (stats.reads[e.result] ?? 0) + 1;
        if (e.result !== 'ok') reason(`read ${e.result}`, e.message);
        break;
      case 'write':
        stats.writes[e.result] = (stats.writes[e.result] ?? 0) + 1;
        if (e.store === 'postgres' || e.store === 'mysql' || e.store === 'zookeeper') stats[e.store].writes[e.result] = (stats[e.store].writes[e.result] ?? 0) + 1;
        if (e.result !== 'ok') reason(`write ${e.result}`, e.message);
        break;
      default:
        break;
    }
  }

  // ---- a transaction holder holds its key until its session ends, whatever it believes: the
  // server killed, restarted or its sessions KILLed, or its worker killed, before its end.
  for (const l of leases.values()) {
    if (!l.xact) continue;
    const end = Math.min(l.lostT ?? Infinity, l.relT ?? Infinity);
    const cut = (input.sessionEnds ?? [])
      .filter((s) => (s.until ?? s.at) > l.start && s.at < end && (s.w === undefined || s.w === l.w))
      .sort((a, b) => a.at - b.at)[0];
    if (!cut) continue;
    l.lostT = Math.max(cut.at, l.start);
    l.lostReason = `session ended: ${cut.why}`;
    stats.mysql.xact.cut += 1;
  }

  // ---- forceRelease(): which leases a call ended, on which lock, from when
  /** Whether the key a call took was `l`'s attempt's (the owner the backend showed: `<l.owner>.<l.gen>-<index>`). */
  const attemptOf = (f: { owner?: string }, l: LeaseTrack): boolean => {
    const m = f.owner === undefined ? null : /^(.+)\.(\d+)-(\d+)$/.exec(f.owner);
    return m !== null && l.owner === m[1] && l.gen === Number(m[2]);
  };
  /**
   * Whether the backend showed `l`'s own id for the forced key holding it right after `l`'s grant
   * (`held-check`): that id's hold the call removed is gone, so this one was taken after the call —
   * the attempt queued for the key again and was given it. The call ended no hold of the lease.
   */
  const requeued = (f: { owner?: string; lock: string }, l: LeaseTrack): boolean => f.owner !== undefined && l.heldAfter?.has(f.lock) === true && l.heldAfter.get(f.lock) === f.owner;
  const requeuedLeases = new Set<string>();
  const forcedAt = new Map<string, number>(); // `${lease id} ${lock}` → the call's start
  const byLockLeases = new Map<string, LeaseTrack[]>();
  for (const l of leases.values()) for (const lock of l.locks) (byLockLeases.get(lock) ?? byLockLeases.set(lock, []).get(lock)!).push(l);
  const forcedLeases = new Map<string, { lease: LeaseTrack; force: { start: number; end?: number; released?: boolean } }>();
  for (const f of forces.values()) {
    // A call answered "nobody held it" ended nothing; one that failed may have (outcome unknown).
    if (f.released === false) continue;
    for (const l of byLockLeases.get(f.lock) ?? []) {
      // A transaction's hold ends with its transaction only (the call answers that nobody holds the key).
      if (l.xact) continue;
      // (Ended before the call: released, lost, or its validity over.)
      const endedBefore = Math.min(l.lostT ?? Infinity, l.relT ?? Infinity) < f.start || (believedValid(l).at(-1)?.[1] ?? l.start) <= f.start;
      // Held when the call began; or granted while it ran and told it was force-released since;
      // or (the watcher's) the lease of the attempt whose key it took, granted on the server before
      // the call — the attempt held its last key right after it (or that is not known) — though
      // received after it.
      const heldAtStart = l.start < f.start && !endedBefore;
      const grantedDuring = l.start >= f.start && l.start <= (f.end ?? Infinity) && l.lostReason === 'force-released';
      const ownedBefore = l.start >= f.start && attemptOf(f, l) && !(f.watch !== undefined && watchComplete.get(f.watch) === false);
      if (ownedBefore && !heldAtStart && !grantedDuring && requeued(f, l)) {
        requeuedLeases.add(l.id);
        continue;
      }
      if (!heldAtStart && !grantedDuring && !ownedBefore) continue;
      const k = `${l.id} ${f.lock}`;
      const at = Math.max(f.start, l.start);
      if (!forcedAt.has(k) || forcedAt.get(k)! > at) forcedAt.set(k, at);
      if (!forcedLeases.has(l.id)) forcedLeases.set(l.id, { lease: l, force: f });
    }
  }
  for (const { lease: l, force: f } of forcedLeases.values()) {
    stats.force.forced += 1;
    if (l.lostReason === 'force-released') {
      stats.force.told += 1;
      if (f.end !== undefined) stats.force.maxTellMs = Math.max(stats.force.maxTellMs, l.lostT! - f.end);
    }
    // Told, one way or another: an extend() asked after the call said it ended the lease must fail.
    if (f.released !== true || f.end === undefined) continue;
    const revived = l.exts.find((x) => x.reqT > f.end! && x.okT !== undefined);
    if (revived) {
      violations.push({
        invariant: 1,
        kind: 'force-not-told',
        lock: l.lock,
        detail: `${l.id}: forceRelease() of ${l.locks.join('+')} returned true at ${fmt(f.end)}, yet its extend() asked at ${fmt(revived.reqT)} succeeded at ${fmt(revived.okT!)}`,
        at: revived.okT,
      });
    }
  }

  // ---- a multi-key lease granted after a forceRelease() took one of its keys from its attempt
  // (the backend showed the key held by `<owner>.<gen>-<index>` just before the call, which
  // returned true): a lease of that owner and generation holds no such key — believed valid at
  // all, it is a lease without one of its locks.
  for (const f of forces.values()) {
    if (f.released !== true || f.end === undefined || f.owner === undefined || f.watch === undefined || watchComplete.get(f.watch) !== false) continue;
    const m = /^(.+)\.(\d+)-(\d+)$/.exec(f.owner);
    if (!m) continue;
    for (const l of byLockLeases.get(f.lock) ?? []) {
      if (!attemptOf(f, l) || l.start <= f.end) continue;
      const valid = believedValid(l);
      if (valid.every(([a, b]) => b - a <= input.toleranceMs)) continue;
      // The backend showed the very id the call took the key from holding it again right after the
      // grant: the attempt had not been told its queue place was first yet, found it gone, queued
      // for the key again under the same id and was given it (ZooKeeper) — the lease holds it.
      if (requeued(f, l)) {
        requeuedLeases.add(l.id);
        continue;
      }
      violations.push({
        invariant: 1,
        kind: 'forced-key-granted',
        lock: f.lock,
        detail:
          `${l.id} (${l.locks.join('+')}, token ${l.token ?? '-'}) was granted at ${fmt(l.start)} and believed valid ${segs(valid)}, ` +
          `although forceRelease() of ${f.lock} had taken that key from its attempt (${f.owner}, generation ${m[2]}) and returned true at ${fmt(f.end)}${l.lostT !== undefined ? `; told at ${fmt(l.lostT)} (${l.lostReason})` : '; never told'}`,
        at: l.start,
      });
    }
  }

  stats.force.requeued = requeuedLeases.size;

  // ---- invariant 1: what different leases of one lock believed valid must not overlap (semaphores: no more than permits at once)
  const pausedOf = new Map<number, Array<[number, number]>>();
  for (const p of input.paused ?? []) (pausedOf.get(p.w) ?? pausedOf.set(p.w, []).get(p.w)!).push([p.start, p.end]);
  const intervals: Interval[] = [];
  for (const l of leases.values()) {
    // A term's work on term.signal: believed until the signal aborted or the work ended. A leader
    // that stepped down (aborted its campaign's signal) believes what remainingMs() said only until
    // then — its own act — and from then on only as long as its work runs.
    const claims = believedValid(l.stepDownT !== undefined ? { ...l, relT: Math.min(l.relT ?? Infinity, l.stepDownT) } : l);
    // …and only while its process runs: stopped (SIGSTOP) it does nothing, and its signal can abort
    // only once it runs again (a pause past the validity is what fencing is for; its writes are checked).
    const work = minus(
      l.work.flatMap(({ start, end }): Array<[number, number]> => {
        const stop = Math.min(end ?? -Infinity, l.lostT ?? Infinity);
        return stop > start ? [[start, stop]] : [];
      }),
      pausedOf.get(l.w) ?? [],
    );
    const believed = work.length ? union(claims, work) : claims;
    for (const lock of l.locks) {
      const cut = forcedAt.get(`${l.id} ${lock}`);
      const segments = clip(believed, cut);
      const end = segments.length ? segments[segments.length - 1][1] : l.start;
      const iv: Interval = { id: l.id, lock, w: l.w, start: l.start, end, token: l.token, segments };
      if (l.permits !== undefined) iv.permits = l.permits;
      if (cut !== undefined) iv.forcedAt = cut;
      if (l.xact) iv.xact = true;
      if (work.length) iv.claimSegments = clip(claims, cut);
      intervals.push(iv);
    }
  }
  const workOf = new Map([...leases.values()].filter((l) => l.work.length > 0).map((l) => [l.id, l]));
  const byLock = groupBy(intervals, (i) => i.lock);
  for (const [lock, list] of byLock) {
    list.sort((a, b) => a.start - b.start);
    const permits = Math.max(...list.map((i) => i.permits ?? 1));
    if (permits > 1) {
      const over = overAdmission(list, permits, input.toleranceMs);
      stats.sem.maxHolders = Math.max(stats.sem.maxHolders, over.maxHolders);
      for (const o of over.periods) {
        violations.push({
          invariant: 1,
          kind: 'over-admission',
          lock,
          detail: `${o.holders.length} holders of a semaphore of ${permits} permits believed valid at once for ${o.ms.toFixed(1)} ms from ${fmt(o.from)}: ${o.holders
            .map((i) => `${i.id} (token ${i.token ?? '-'}) ${segs(i.segments)}`)
            .join('; ')}`,
          at: o.from,
        });
      }
      continue;
    }
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length && list[j].start < list[i].end; j++) {
        const a = list[i];
        const b = list[j];
        const [overlap, from] = overlapOf(a.segments, b.segments);
        if (overlap <= 0) continue;
        stats.maxOverlapMs = Math.max(stats.maxOverlapMs, overlap);
        if (overlap > input.toleranceMs && (a.claimSegments || b.claimSegments) && overlapOf(a.claimSegments ?? a.segments, b.claimSegments ?? b.segments)[0] <= input.toleranceMs) {
          // Only through a stepped-down leader's work on term.signal: two leaders working.
          const [old, next] = a.claimSegments ? [a, b] : [b, a];
          const l = workOf.get(old.id)!;
          const w = l.work.at(-1)!;
          violations.push({
            invariant: 1,
            kind: 'stepped-down-working',
            lock,
            detail:
              `${old.id} (token ${old.token ?? '-'})${l.stepDownT !== undefined ? ` stepped down at ${fmt(l.stepDownT)} (its campaign's signal aborted)` : ''}, yet its work on term.signal ran ${fmt(w.start)}..${w.end !== undefined ? fmt(w.end) : '?'} ` +
              `(${l.lostT !== undefined ? `signal aborted at ${fmt(l.lostT)}` : 'term.signal never aborted'}, ended: ${w.why ?? '?'}), while ${next.id} (token ${next.token ?? '-'}) led ${segs(next.segments)}: ${overlap.toFixed(1)} ms of two leaders working from ${fmt(from)}`,
            at: from,
          });
        } else if (overlap > input.toleranceMs) {
          violations.push({
            invariant: 1,
            kind: 'overlap',
            lock,
            detail:
              `${a.id} (token ${a.token ?? '-'}) believed valid ${segs(a.segments)} and ${b.id} (token ${b.token ?? '-'}) ` +
              `${segs(b.segments)}: ${overlap.toFixed(1)} ms of overlap from ${fmt(from)}`,
            at: from,
          });
        }
      }
    }
  }

  // ---- list(): a lease believed valid for the whole call (and the clocks' tolerance either side)
  // is in the answer. Redlock aside: a holder whose masters are partly down still believes in its
  // lease while the answering masters no longer make a majority for it.
  for (const call of lists.values()) {
    if (call.listed !== false || call.end === undefined || call.lock.includes('redlock:')) continue;
    const from = call.start - input.toleranceMs;
    const to = call.end + input.toleranceMs;
    // (A transaction's hold is not a lease: list() names leases only.)
    const missed = (byLock.get(call.lock) ?? []).find((iv) => !iv.xact && iv.segments.some(([a, b]) => a <= from && b >= to));
    if (missed) {
      violations.push({
        invariant: 1,
        kind: 'list-missed',
        lock: call.lock,
        detail: `list() from ${fmt(call.start)} to ${fmt(call.end)} did not report ${call.lock}, while ${missed.id} (token ${missed.token ?? '-'}) believed it valid ${segs(missed.segments)}`,
        at: call.start,
      });
    }
  }

  // ---- invariant 3: tokens per lock (correctness; on PostgreSQL and ZooKeeper every lease of the key, both purposes; Redlock has none)
  const fenced = (l: LeaseTrack & { on: string }): boolean => l.token !== undefined && (l.purpose === 'correctness' || NAMED.test(l.on));
  const perLock = [...leases.values()].flatMap((l) => l.locks.map((on) => ({ ...l, on }))).filter(fenced);
  for (const [lock, list] of groupBy(perLock, (l) => l.on)) {
    const seen = new Map<string, string>();
    for (const l of list) {
      const other = seen.get(l.token!);
      if (other) violations.push({ invariant: 3, kind: 'duplicate-token', lock, detail: `${other} and ${l.id} were both granted token ${l.token}`, at: l.start });
      else seen.set(l.token!, l.id);
    }
    const sorted = [...list].sort((a, b) => a.start - b.start);
    for (const b of sorted) {
      if (b.reqT === undefined) continue;
      // Every lease received before b was even requested must carry a lower token.
      let worst: LeaseTrack | undefined;
      for (const a of sorted) {
        if (a.start >= b.reqT) break;
        if (a.id !== b.id && BigInt(a.token!) >= BigInt(b.token!) && (!worst || BigInt(a.token!) > BigInt(worst.token!))) worst = a;
      }
      if (worst) {
        violations.push({
          invariant: 3,
          kind: 'token-regression',
          lock,
          detail: `${b.id} requested at ${fmt(b.reqT)} got token ${b.token}, not above ${worst.id}'s ${worst.token} received at ${fmt(worst.start)}`,
          at: b.start,
        });
      }
    }
  }

  // ---- invariant 2: registers
  const writes = input.events.filter((e): e is Extract<SimEvent, { ev: 'write' }> => e.ev === 'write');
  // A write whose answer never came back (its worker was killed): outcome unknown.
  const answered = new Set(writes.map((w) => w.el));
  for (const e of input.events) {
    if (e.ev === 'write-start' && !answered.has(e.el)) {
      writes.push({ ...e, ev: 'write', result: 'unknown', message: 'no answer (the worker died)' });
      stats.writes.unknown = (stats.writes.unknown ?? 0) + 1;
    }
  }
  const intervalOf = new Map(intervals.map((i) => [i.id, i]));
  for (const w of writes) {
    if (w.result !== 'ok') continue;
    const iv = intervalOf.get(w.id);
    // (A transaction holder's write is acknowledged at its COMMIT's answer, after its hold ended.)
    if (iv && !iv.xact && w.t > iv.end + input.toleranceMs) stats.writesAfterLeaseEnd += 1;
  }
  const storeOf = (store: string): string => (input.control === 'unfenced' ? 'plain' : store);
  const writesByReg = groupBy(writes, (w) => registerId(storeOf(w.store), w.key, w.ns));
  const finals = new Map(input.registers.map((r) => [registerId(r.store, r.key, r.ns), r.list ?? []]));
  for (const [reg, list] of writesByReg) {
    const final = finals.get(reg);
    if (final === undefined) {
      violations.push({ invariant: 2, kind: 'register-unread', lock: reg, detail: `the final value of register ${reg} was not read` });
      continue;
    }
    const byEl = new Map(list.map((w) => [w.el, w]));
    const present = new Map<string, number>();
    for (const [el] of final) present.set(el, (present.get(el) ?? 0) + 1);
    for (const w of list) {
      if (w.result === 'ok' && !present.has(w.el)) {
        violations.push({ invariant: 2, kind: 'lost-update', lock: reg, detail: `acknowledged element ${w.el} (token ${w.token ?? '-'}, by ${w.id}) is missing from the final value (${final.length} elements)`, at: w.t });
      }
      if ((w.result === 'stale' || w.result === 'refused' || w.result === 'rolledback') && present.has(w.el)) {
        violations.push({ invariant: 2, kind: 'refused-write-applied', lock: reg, detail: `element ${w.el} (token ${w.token ?? '-'}) was reported ${w.result} but is in the final value`, at: w.t });
      }
    }
    for (const [el, n] of present) {
      if (n > 1) violations.push({ invariant: 2, kind: 'duplicate-element', lock: reg, detail: `element ${el} appears ${n} times` });
      if (!byEl.has(el)) violations.push({ invariant: 2, kind: 'unknown-element', lock: reg, detail: `element ${el} in the final value was never written by this run` });
    }
    if (input.control !== 'unfenced') {
      let highest: bigint | undefined;
      let highestEl = '';
      for (const [el, token] of final) {
        if (token === null) continue;
        const t = BigInt(token);
        if (highest !== undefined && t < highest) {
          violations.push({ invariant: 2, kind: 'stale-accepted', lock: reg, detail: `element ${el} with token ${token} was accepted after ${highestEl} with token ${highest}` });
        }
        if (highest === undefined || t > highest) {
          highest = t;
          highestEl = el;
        }
      }
    }
  }

  // ---- invariant 4: liveness
  if (input.probes) {
    const used = new Set(intervals.map((i) => i.lock));
    for (const e of input.events) if (e.ev === 'req') for (const lock of locksOf(e)) used.add(lock);
    stats.livenessMaxMs = Math.max(0, ...input.probes.filter((p) => p.ok).map((p) => p.elapsedMs));
    for (const lock of used) {
      const probe = input.probes.find((p) => lockId(p.purpose, p.key, p.backend, p.ns) === lock);
      const bound = input.livenessBoundMs[lock];
      if (!probe) violations.push({ invariant: 4, kind: 'probe-missing', lock, detail: `no probe answer for ${lock}` });
      else if (!probe.ok) violations.push({ invariant: 4, kind: 'stuck', lock, detail: `a fresh instance could not acquire ${lock} ${probe.elapsedMs.toFixed(0)} ms after the last worker was gone: ${probe.message}` });
      else if (bound !== undefined && probe.elapsedMs > bound) {
        violations.push({ invariant: 4, kind: 'held-too-long', lock, detail: `a fresh instance got ${lock} only ${probe.elapsedMs.toFixed(0)} ms after the last worker was gone (bound ${bound} ms)` });
      }
    }
  } else {
    violations.push({ invariant: 4, kind: 'probe-missing', detail: 'the liveness probe did not run' });
  }
  for (const w of input.workers) {
    if (w.how === 'crashed') continue;
    if (!w.drained && w.signal === 'SIGKILL') violations.push({ invariant: 4, kind: 'hung', detail: `worker w${w.w}.${w.inc} did not finish its calls and settle within the drain deadline` });
    // Gone on its own before it drained: an uncaught exception (its stack is in the run's output).
    else if (!w.drained) violations.push({ invariant: 4, kind: 'died', detail: `worker w${w.w}.${w.inc} exited by itself (${w.exitCode !== null ? `code ${w.exitCode}` : w.signal}) before it finished its calls — ${w.stderr?.trim() ? `its stderr ended: ${w.stderr.trim().slice(-1_500)}` : 'it wrote nothing to stderr'}` });
    else if (w.exitCode === 3) violations.push({ invariant: 5, kind: 'kept-alive', detail: `worker w${w.w}.${w.inc}: something kept the event loop alive 5 s after app.close()` });
    else if (w.exitCode !== 0) violations.push({ invariant: 5, kind: 'bad-exit', detail: `worker w${w.w}.${w.inc} exited with ${w.exitCode ?? w.signal}` });
  }

  // ---- invariant 5: sizes back to baseline, no leaked handles
  const baselines = new Map<string, Record<string, number>>();
  for (const e of input.events) {
    if (e.ev === 'sizes' && e.phase === 'baseline') baselines.set(`${e.w}.${e.inc}`, e.sizes);
  }
  for (const e of input.events) {
    if (e.ev === 'sizes' && e.phase === 'final') {
      const base = baselines.get(`${e.w}.${e.inc}`) ?? {};
      for (const [name, n] of Object.entries(e.sizes)) {
        const b = base[name] ?? 0;
        const keyCache = isKeyCache(name);
        const limit = keyCache ? b + 2 * input.keys : b;
        if (n > limit) {
          violations.push({
            invariant: 5,
            kind: 'grown',
            lock: name,
            detail: `w${e.w}.${e.inc}: ${name} is ${n} once nothing is held (baseline ${b}${keyCache ? `, + ${2 * input.keys} keys allowed` : ''}; waited ${e.settledMs.toFixed(0)} ms)`,
            at: e.t,
          });
        }
      }
    }
    if (e.ev === 'exit-resources' && e.leaked.length > 0) {
      violations.push({ invariant: 5, kind: 'leaked-handles', detail: `w${e.w}.${e.inc}: after app.close() still active: ${e.leaked.join(', ')}`, at: e.t });
    }
  }

  for (const [name, n] of Object.entries(stats.failures)) {
    if (!EXPECTED_FAILURES.has(name)) stats.failures[`unexpected:${name}`] = n;
  }
  return { violations, stats, intervals };
}

/** The union of two lists of segments, sorted and merged. */
function union(a: Array<[number, number]>, b: Array<[number, number]>): Array<[number, number]> {
  const all = [...a, ...b].sort((x, y) => x[0] - y[0]);
  const out: Array<[number, number]> = [];
  for (const [s, e] of all) {
    const last = out[out.length - 1];
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else out.push([s, e]);
  }
  return out;
}

/** `segments` without the times in `holes` (each list sorted or not). */
function minus(segments: Array<[number, number]>, holes: Array<[number, number]>): Array<[number, number]> {
  let out = segments;
  for (const [hs, he] of holes) {
    out = out.flatMap(([s, e]): Array<[number, number]> => {
      if (he <= s || hs >= e) return [[s, e]];
      const parts: Array<[number, number]> = [];
      if (hs > s) parts.push([s, hs]);
      if (he < e) parts.push([he, e]);
      return parts;
    });
  }
  return out;
}

/** Segments cut at `at` (undefined: as they are). */
function clip(segments: Array<[number, number]>, at: number | undefined): Array<[number, number]> {
  if (at === undefined) return segments;
  return segments.flatMap(([s, e]): Array<[number, number]> => (s >= at ? [] : [[s, Math.min(e, at)]]));
}

/**
 * Where more than `permits` of these intervals are believed valid at once for longer than
 * `toleranceMs` (a sweep over every segment), and the most at once.
 */
export function overAdmission(
  list: Interval[],
  permits: number,
  toleranceMs: number,
): { maxHolders: number; periods: Array<{ from: number; ms: number; holders: Interval[] }> } {
  const points: Array<{ t: number; d: 1 | -1; iv: Interval }> = [];
  for (const iv of list) for (const [s, e] of iv.segments) if (e > s) points.push({ t: s, d: 1, iv }, { t: e, d: -1, iv });
  // Ends before starts at one instant: touching segments are not at once.
  points.sort((a, b) => a.t - b.t || a.d - b.d);
  const active = new Map<Interval, number>();
  let maxHolders = 0;
  const periods: Array<{ from: number; ms: number; holders: Interval[] }> = [];
  let open: { from: number; holders: Set<Interval> } | undefined;
  for (const p of points) {
    const before = active.size;
    if (p.d === 1) active.set(p.iv, (active.get(p.iv) ?? 0) + 1);
    else if ((active.get(p.iv) ?? 0) <= 1) active.delete(p.iv);
    else active.set(p.iv, active.get(p.iv)! - 1);
    maxHolders = Math.max(maxHolders, active.size);
    if (active.size > permits && before <= permits) open = { from: p.t, holders: new Set(active.keys()) };
    else if (open && active.size > permits) for (const iv of active.keys()) open.holders.add(iv);
    else if (open && active.size <= permits) {
      const ms = p.t - open.from;
      if (ms > toleranceMs) periods.push({ from: open.from, ms, holders: [...open.holders] });
      open = undefined;
    }
  }
  return { maxHolders, periods };
}

/** Total overlap of two sorted disjoint segment lists, and where it starts. */
export function overlapOf(a: Array<[number, number]>, b: Array<[number, number]>): [number, number] {
  let total = 0;
  let from = Infinity;
  for (const [s1, e1] of a) {
    for (const [s2, e2] of b) {
      const o = Math.min(e1, e2) - Math.max(s1, s2);
      if (o > 0) {
        total += o;
        from = Math.min(from, Math.max(s1, s2));
      }
    }
  }
  return [total, from];
}

const segs = (segments: Array<[number, number]>): string => (segments.length ? segments.map(([s, e]) => `${fmt(s)}..${fmt(e)}`).join(', ') : 'never');

function groupBy<T>(items: T[], keyOf: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) {
    const k = keyOf(item);
    let list = map.get(k);
    if (!list) map.set(k, (list = []));
    list.push(item);
  }
  return map;
}

/** Wall-clock ms as hh:mm:ss.mmm (UTC), for violation details. */
export function fmt(t: number): string {
  // (A transaction holder never seen to end holds until the end of the log: `end`.)
  if (!Number.isFinite(t)) return 'end';
  return new Date(t).toISOString().slice(11, 23);
}
