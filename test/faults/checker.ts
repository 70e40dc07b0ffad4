/**
 * Checks a recorded fault run. Pure: events (as the controller received them, on its monotonic
 * clock) and the register's final value in, figures out. Unit-tested in checker.spec.ts.
 */

/**
 * How closely the workers' stamps agree across processes (wallNow() is calibrated once per process
 * against Date.now()'s tick, which a process descheduled while it spins can miss by a fraction of a
 * ms): validity windows overlapping by less are a hand-over, not two holders. Seen: a grant stamped
 * 0.17 ms before the release that caused it. A real overlap lasts the overtaken holder's work.
 */
const CLOCK_AGREEMENT_MS = 2;

export type WorkerEventName =
  | 'acquiring'
  | 'acquired'
  | 'read'
  | 'read-stale'
  | 'write-ok'
  | 'write-stale'
  | 'write-unknown'
  | 'releasing'
  | 'released'
  | 'lost'
  | 'error'
  /** Semaphore workers: the holder acted (after its work, without looking at its signal). */
  | 'act'
  /** Leaders: the watchdog renewed the term; `validUntil` is its new end. */
  | 'renewed'
  /** Leaders: a read of the register failed while leading (the term goes on). */
  | 'read-failed'
  /** Recorded by the controller when it kill -9s a worker: that worker holds nothing from then on. */
  | 'killed';

export interface HistoryEvent {
  /** Controller receipt time, ms (monotonic). */
  t: number;
  worker: number;
  e: WorkerEventName;
  token?: string;
  /** Element a write appends. */
  el?: string;
  reason?: string;
  /** On `acquired`: until when the worker's lease said it could be trusted (same clock as `t`). */
  validUntil?: number;
}

export interface FaultEvent {
  t: number;
  end?: number;
  kind: string;
  worker?: number;
  detail?: string;
}

/** The register: a list of [element, token] appended by read-modify-writes. */
export type Register = Array<[string, string | null]>;

export interface CheckResult {
  acquisitions: number;
  acknowledgedWrites: number;
  unknownWrites: number;
  staleRejected: number;
  /** Accepted writes whose token is lower than an earlier accepted write's (from the register order). */
  staleAccepted: number;
  /** A grant whose token is not above that of a lease released or lost before it was requested. */
  tokenRegressions: number;
  /** Acknowledged elements missing from the final register. */
  lostUpdates: number;
  /** Pairs of holding intervals of different workers that intersect. */
  overlaps: number;
  /**
   * Pairs of validity windows (acquired → the earlier of releasing and the lease's own validity
   * end) of different workers that intersect: two processes each told their lease was valid.
   */
  validityOverlaps: number;
  /** Of those, the pairs where the earlier holder's lease was never signalled lost: mutual exclusion broken. */
  unexplainedOverlaps: number;
  lossesSignalled: number;
  /** Set by the run (it knows the faults): tokens across restarts and kills of the server, see tokensAcrossServerFaults. */
  acrossServerFaults?: AcrossServerFaults;
  /** Receipt of the loss signal minus the lease's validity end (acquired + ttl), ms. */
  signalDelayP50?: number;
  signalDelayP99?: number;
}

export function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

interface Interval {
  worker: number;
  start: number;
  end: number;
  token?: bigint;
  /** End of the lease's validity as the worker computed it (undefined: not reported). */
  validUntil?: number;
  /** The worker was signalled the loss of this lease (at any time before its next grant). */
  lost?: boolean;
}

/**
 * Holding intervals: from `acquired` until the worker starts releasing (a lost lease still acts
 * until then). The release's own round trip is not holding: a slow answer (an election) must not
 * look like two holders.
 */
export function holdingIntervals(events: HistoryEvent[]): Interval[] {
  const open = new Map<number, Interval>();
  const intervals: Interval[] = [];
  const lastT = events.length ? events[events.length - 1].t : 0;
  const latest = new Map<number, Interval>();
  for (const ev of events) {
    if (ev.e === 'acquired') {
      const interval: Interval = { worker: ev.worker, start: ev.t, end: Infinity, token: ev.token ? BigInt(ev.token) : undefined, validUntil: ev.validUntil };
      open.set(ev.worker, interval);
      latest.set(ev.worker, interval);
    }
    if (ev.e === 'lost') {
      const interval = latest.get(ev.worker);
      if (interval) interval.lost = true;
    }
    if (ev.e === 'releasing' || ev.e === 'released' || ev.e === 'error' || ev.e === 'killed') {
      const interval = open.get(ev.worker);
      if (interval) {
        interval.end = ev.t;
        intervals.push(interval);
        open.delete(ev.worker);
      }
    }
  }
  for (const interval of open.values()) intervals.push({ ...interval, end: lastT });
  return intervals.sort((a, b) => a.start - b.start);
}

export function check(events: HistoryEvent[], register: Register, ttlMs: number): CheckResult {
  const ordered = [...events].sort((a, b) => a.t - b.t);
  const acked = ordered.filter((e) => e.e === 'write-ok');

  let staleAccepted = 0;
  let highest: bigint | undefined;
  for (const [, token] of register) {
    if (token === null) continue;
    const t = BigInt(token);
    if (highest !== undefined && t < highest) staleAccepted += 1;
    if (highest === undefined || t > highest) highest = t;
  }

  const present = new Set(register.map(([el]) => el));
  const lostUpdates = acked.filter((e) => e.el !== undefined && !present.has(e.el)).length;

  // Token order: a lease whose release (or loss) the controller saw before another worker even
  // asked must have a lower token than what that worker is granted.
  let tokenRegressions = 0;
  let endedMax: bigint | undefined;
  const tokenOf = new Map<number, bigint | undefined>();
  const askedAfter = new Map<number, bigint | undefined>();
  for (const ev of ordered) {
    if (ev.e === 'acquiring') askedAfter.set(ev.worker, endedMax);
    if (ev.e === 'acquired' && ev.token !== undefined) {
      const token = BigInt(ev.token);
      tokenOf.set(ev.worker, token);
      const floor = askedAfter.get(ev.worker);
      if (floor !== undefined && token <= floor) tokenRegressions += 1;
    }
    // A killed holder's lease ends in the database at its ttl: whoever is granted the key after the
    // kill is granted it after that end, so with a larger token.
    if ((ev.e === 'released' || ev.e === 'lost' || ev.e === 'killed') && tokenOf.get(ev.worker) !== undefined) {
      const token = tokenOf.get(ev.worker)!;
      if (endedMax === undefined || token > endedMax) endedMax = token;
    }
  }

  const intervals = holdingIntervals(ordered);
  let overlaps = 0;
  for (let i = 0; i < intervals.length; i++) {
    for (let j = i + 1; j < intervals.length && intervals[j].start < intervals[i].end; j++) {
      if (intervals[j].worker !== intervals[i].worker) overlaps += 1;
    }
  }

  // Validity windows: a lease the worker was told is valid until validUntil (acquired + ttl when
  // it did not say) and that it had not yet begun to release.
  const windows = intervals.map((iv) => ({ ...iv, end: Math.min(iv.end, iv.validUntil ?? iv.start + ttlMs) })).sort((a, b) => a.start - b.start);
  let validityOverlaps = 0;
  let unexplainedOverlaps = 0;
  for (let i = 0; i < windows.length; i++) {
    for (let j = i + 1; j < windows.length && windows[j].start < windows[i].end - CLOCK_AGREEMENT_MS; j++) {
      if (windows[j].worker === windows[i].worker) continue;
      validityOverlaps += 1;
      if (!windows[i].lost) unexplainedOverlaps += 1;
    }
  }

  const acquiredAt = new Map<number, number>();
  const delays: number[] = [];
  for (const ev of ordered) {
    if (ev.e === 'acquired') acquiredAt.set(ev.worker, ev.t);
    if (ev.e === 'lost' && acquiredAt.has(ev.worker)) delays.push(ev.t - (acquiredAt.get(ev.worker)! + ttlMs));
  }

  return {
    acquisitions: ordered.filter((e) => e.e === 'acquired').length,
    acknowledgedWrites: acked.length,
    unknownWrites: ordered.filter((e) => e.e === 'write-unknown').length,
    staleRejected: ordered.filter((e) => e.e === 'write-stale' || e.e === 'read-stale').length,
    staleAccepted,
    tokenRegressions,
    lostUpdates,
    overlaps,
    validityOverlaps,
    unexplainedOverlaps,
    lossesSignalled: ordered.filter((e) => e.e === 'lost').length,
    signalDelayP50: percentile(delays, 50),
    signalDelayP99: percentile(delays, 99),
  };
}

export interface AcrossServerFaults {
  /** Server faults with a grant carrying a token both before they began and asked for after they ended. */
  faults: number;
  /** Grants asked for after such a fault ended and before the next one began, each compared. */
  grantsChecked: number;
  /** Of those, grants whose token is not above every token granted before the fault began. */
  regressions: number;
  /** The first regression: the fault, the highest token before it, the grant after it. */
  first?: { fault: string; before: string; after: string; worker: number; t: number };
}

/**
 * Tokens across faults of the server itself (a restart, a kill -9 and crash recovery): a grant
 * asked for after the fault had ended was made by the server as it came back, so its token must be
 * above every token granted (received) before the fault began — a counter that lost its place
 * would issue one again. Stricter than `check`'s order, which compares with leases already ended.
 */
export function tokensAcrossServerFaults(events: HistoryEvent[], faults: FaultEvent[]): AcrossServerFaults {
  const ordered = [...events].sort((a, b) => a.t - b.t);
  const out: AcrossServerFaults = { faults: 0, grantsChecked: 0, regressions: 0 };
  const sorted = faults.filter((f) => f.end !== undefined).sort((a, b) => a.t - b.t);
  for (const [i, fault] of sorted.entries()) {
    if (fault.end === undefined) continue;
    // Grants asked for up to the next such fault: each grant is compared across one fault.
    const until = sorted[i + 1]?.t ?? Infinity;
    let before: bigint | undefined;
    for (const ev of ordered) {
      if (ev.t >= fault.t) break;
      if (ev.e === 'acquired' && ev.token !== undefined && (before === undefined || BigInt(ev.token) > before)) before = BigInt(ev.token);
    }
    if (before === undefined) continue;
    const askedAt = new Map<number, number>();
    let checked = 0;
    for (const ev of ordered) {
      if (ev.e === 'acquiring') askedAt.set(ev.worker, ev.t);
      const asked = askedAt.get(ev.worker) ?? -Infinity;
      if (ev.e !== 'acquired' || ev.token === undefined || asked <= fault.end || asked >= until) continue;
      checked += 1;
      if (BigInt(ev.token) <= before) {
        out.regressions += 1;
        out.first ??= { fault: fault.kind, before: before.toString(), after: ev.token, worker: ev.worker, t: ev.t };
      }
    }
    if (checked > 0) out.faults += 1;
    out.grantsChecked += checked;
  }
  return out;
}

/** ms from `t` to the first grant after it (to anyone), undefined when none came. */
export function firstGrantAfter(events: HistoryEvent[], t: number): number | undefined {
  let first: number | undefined;
  for (const ev of events) if (ev.e === 'acquired' && ev.t > t && (first === undefined || ev.t < first)) first = ev.t;
  return first === undefined ? undefined : first - t;
}

// ——— Semaphores and leader terms ———————————————————————————————————————————————————————————

/** One grant as the engine saw it: valid from `start` (the grant) until `end`. */
export interface ValidityWindow {
  worker: number;
  start: number;
  /** The earliest of: the holder began releasing (or was killed, or its loop failed), its loss was signalled, the last validity end it was told. */
  end: number;
  token?: bigint;
  /** The loss of this grant was signalled to the holder (at any time). */
  lost: boolean;
}

/**
 * The validity window of every grant, in the engine's view: from `acquired` until the first of
 * `releasing`/`released`/`error`/`killed`, `lost`, and the latest `validUntil` the worker reported
 * for the grant (on `acquired`, and for a renewed leader on `renewed` and `read`); acquired + ttl
 * when it reported none. A paused holder learns of its loss late, but its reported validity had
 * ended by then: its window ends there, not at the signal.
 */
export function validityWindows(events: HistoryEvent[], ttlMs: number): ValidityWindow[] {
  const ordered = [...events].sort((a, b) => a.t - b.t);
  const lastT = ordered.length ? ordered[ordered.length - 1].t : 0;
  interface Open {
    w: ValidityWindow;
    validUntil?: number;
    cut?: number;
  }
  const open = new Map<number, Open>();
  const windows: ValidityWindow[] = [];
  const close = (o: Open, at: number): void => {
    const validEnd = o.validUntil ?? o.w.start + ttlMs;
    o.w.end = Math.max(o.w.start, Math.min(at, o.cut ?? Infinity, validEnd));
    windows.push(o.w);
  };
  for (const ev of ordered) {
    const o = open.get(ev.worker);
    if (ev.e === 'acquired') {
      if (o) close(o, ev.t);
      open.set(ev.worker, { w: { worker: ev.worker, start: ev.t, end: Infinity, token: ev.token ? BigInt(ev.token) : undefined, lost: false }, validUntil: ev.validUntil });
      continue;
    }
    if (!o) continue;
    // Only a report with time left moves the end: remainingMs() is 0 once the validity is over,
    // and wallNow() + 0 must not read as a renewal.
    if (ev.validUntil !== undefined && ev.validUntil > ev.t && (ev.e === 'renewed' || ev.e === 'read') && o.cut === undefined) {
      o.validUntil = Math.max(o.validUntil ?? -Infinity, ev.validUntil);
    }
    if (ev.e === 'lost') {
      o.w.lost = true;
      o.cut ??= ev.t;
    }
    if (ev.e === 'releasing' || ev.e === 'released' || ev.e === 'error' || ev.e === 'killed') {
      close(o, ev.t);
      open.delete(ev.worker);
    }
  }
  for (const o of open.values()) close(o, lastT);
  return windows.sort((a, b) => a.start - b.start);
}

export interface OverAdmission {
  /** Grants after which more than `permits` windows were open at once. */
  violations: number;
  /** The most windows open at one instant. */
  maxHolders: number;
  /** The first violation: when, and the holders (worker, token) whose windows were open then. */
  first?: { t: number; holders: Array<{ worker: number; token?: string; start: number; end: number }> };
}

/**
 * Over-admission: at no instant more than `permits` validity windows open (windows that merely
 * touch — one ends as the next starts — do not overlap). Pure; `permits: 1` checks leader terms.
 */
export function overAdmission(windows: ValidityWindow[], permits: number): OverAdmission {
  const points: Array<{ t: number; d: 1 | -1; w: ValidityWindow }> = [];
  for (const w of windows) {
    if (w.end <= w.start) continue;
    points.push({ t: w.start, d: 1, w }, { t: w.end, d: -1, w });
  }
  // Ends before starts at one instant.
  points.sort((a, b) => a.t - b.t || a.d - b.d);
  const active = new Set<ValidityWindow>();
  let violations = 0;
  let maxHolders = 0;
  let first: OverAdmission['first'];
  for (const p of points) {
    if (p.d === -1) {
      active.delete(p.w);
      continue;
    }
    active.add(p.w);
    maxHolders = Math.max(maxHolders, active.size);
    if (active.size > permits) {
      violations += 1;
      first ??= { t: p.t, holders: [...active].map((w) => ({ worker: w.worker, token: w.token?.toString(), start: w.start, end: w.end })) };
    }
  }
  return { violations, maxHolders, first };
}

/**
 * Tokens of grants on one key: `duplicates` — a token granted twice; `regressions` — a grant whose
 * token is not above every token granted (acquired reported) before its holder asked.
 */
export function grantTokens(events: HistoryEvent[]): { duplicates: number; regressions: number } {
  const ordered = [...events].sort((a, b) => a.t - b.t);
  const seen = new Set<string>();
  let duplicates = 0;
  let regressions = 0;
  let maxGranted: bigint | undefined;
  const floorOf = new Map<number, bigint | undefined>();
  for (const ev of ordered) {
    if (ev.e === 'acquiring') floorOf.set(ev.worker, maxGranted);
    if (ev.e !== 'acquired' || ev.token === undefined) continue;
    if (seen.has(ev.token)) duplicates += 1;
    seen.add(ev.token);
    const token = BigInt(ev.token);
    const floor = floorOf.get(ev.worker);
    if (floor !== undefined && token <= floor) regressions += 1;
    if (maxGranted === undefined || token > maxGranted) maxGranted = token;
  }
  return { duplicates, regressions };
}

/**
 * Grants whose holder acted (`act`, or tried a write) after its validity window had ended: a paused
 * holder resuming — harmless for a semaphore or a leader only if the resource refuses it (fence).
 */
export function actedAfterExpiry(events: HistoryEvent[], windows: ValidityWindow[]): number {
  const byWorker = new Map<number, ValidityWindow[]>();
  for (const w of windows) byWorker.set(w.worker, [...(byWorker.get(w.worker) ?? []), w]);
  const late = new Set<ValidityWindow>();
  for (const ev of events) {
    if (ev.e !== 'act' && ev.e !== 'write-ok' && ev.e !== 'write-stale' && ev.e !== 'write-unknown') continue;
    if (ev.reason === 'late') continue; // the outcome of an earlier attempt, not a new act
    const own = (byWorker.get(ev.worker) ?? []).filter((w) => w.start <= ev.t).pop();
    if (own && ev.t > own.end) late.add(own);
  }
  return late.size;
}

/** ms from `t` to the first grant after it to a worker other than `except`; undefined when none came. */
export function handOver(events: HistoryEvent[], t: number, except?: number): number | undefined {
  let first: number | undefined;
  for (const ev of events) if (ev.e === 'acquired' && ev.t > t && ev.worker !== except && (first === undefined || ev.t < first)) first = ev.t;
  return first === undefined ? undefined : first - t;
}

export interface SemaphoreResult {
  permits: number;
  acquisitions: number;
  /** Must be 0: grants after which more than `permits` holders were within their validity. */
  overAdmission: number;
  maxHolders: number;
  firstOverAdmission?: OverAdmission['first'];
  /** The checker's own control: the same windows against permits − 1 must show violations (the run reached `permits` holders at once). */
  overAdmissionAtPermitsMinus1: number;
  /** Paused holders that acted after their permit's validity ended (not over-admission: they had been told, or their validity was over). */
  actedAfterExpiry: number;
  lossesSignalled: number;
  tokenDuplicates: number;
  tokenRegressions: number;
}

export function checkSemaphore(events: HistoryEvent[], ttlMs: number, permits: number): SemaphoreResult {
  const windows = validityWindows(events, ttlMs);
  const over = overAdmission(windows, permits);
  const tokens = grantTokens(events);
  return {
    permits,
    acquisitions: events.filter((e) => e.e === 'acquired').length,
    overAdmission: over.violations,
    maxHolders: over.maxHolders,
    firstOverAdmission: over.first,
    overAdmissionAtPermitsMinus1: permits > 1 ? overAdmission(windows, permits - 1).violations : 0,
    actedAfterExpiry: actedAfterExpiry(events, windows),
    lossesSignalled: events.filter((e) => e.e === 'lost').length,
    tokenDuplicates: tokens.duplicates,
    tokenRegressions: tokens.regressions,
  };
}

export interface LeaderResult {
  terms: number;
  /** Must be 0: instants at which two leaders were both within their terms' validity. */
  termOverlaps: number;
  firstTermOverlap?: OverAdmission['first'];
  /** Terms whose leader still wrote (or tried to) after its term's validity ended: a paused leader resuming. */
  actedAfterExpiry: number;
  /** Terms whose token is not above every earlier term's (in grant order), and tokens granted twice. */
  tokenRegressions: number;
  tokenDuplicates: number;
  /** Per fault kind: ms from the fault to the next leader (another worker's grant). */
  handOvers: Record<string, number[]>;
  /** Faults after which no other worker led before the run ended. */
  noHandOver: number;
}

export function checkLeader(events: HistoryEvent[], ttlMs: number, faults: FaultEvent[]): LeaderResult {
  const ordered = [...events].sort((a, b) => a.t - b.t);
  const windows = validityWindows(ordered, ttlMs);
  const over = overAdmission(windows, 1);
  let regressions = 0;
  let duplicates = 0;
  let highest: bigint | undefined;
  const seen = new Set<string>();
  for (const ev of ordered) {
    if (ev.e !== 'acquired' || ev.token === undefined) continue;
    if (seen.has(ev.token)) duplicates += 1;
    seen.add(ev.token);
    const token = BigInt(ev.token);
    if (highest !== undefined && token <= highest) regressions += 1;
    if (highest === undefined || token > highest) highest = token;
  }
  const handOvers: Record<string, number[]> = {};
  let noHandOver = 0;
  for (const fault of faults) {
    const ms = handOver(ordered, fault.t, fault.worker);
    if (ms === undefined) noHandOver += 1;
    else (handOvers[fault.kind] ??= []).push(ms);
  }
  return {
    terms: ordered.filter((e) => e.e === 'acquired').length,
    termOverlaps: over.violations,
    firstTermOverlap: over.first,
    actedAfterExpiry: actedAfterExpiry(ordered, windows),
    tokenRegressions: regressions,
    tokenDuplicates: duplicates,
    handOvers,
    noHandOver,
  };
}
