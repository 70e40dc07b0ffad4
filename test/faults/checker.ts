/**
 * Checks a recorded fault run. Pure: events (as the controller received them, on its monotonic
 * clock) and the register's final value in, figures out. Unit-tested in checker.spec.ts.
 */

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
    for (let j = i + 1; j < windows.length && windows[j].start < windows[i].end; j++) {
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

/** ms from `t` to the first grant after it (to anyone), undefined when none came. */
export function firstGrantAfter(events: HistoryEvent[], t: number): number | undefined {
  let first: number | undefined;
  for (const ev of events) if (ev.e === 'acquired' && ev.t > t && (first === undefined || ev.t < first)) first = ev.t;
  return first === undefined ? undefined : first - t;
}
