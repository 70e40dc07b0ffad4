/**
 * A wall clock with sub-millisecond resolution that processes on one machine agree on:
 * Date.now() calibrated against performance.now() at the moments it ticks. (Node's
 * performance.timeOrigin is off by up to ~2 ms from process to process; this is off by µs.)
 *
 * A tick happened between the previous read of Date.now() and the one that saw the new value: its
 * performance.now() lies between the reads around them. A process descheduled there (a loaded
 * machine: the simulation beside a full test run) widens that bracket by milliseconds, and one
 * such sample put two workers' clocks ~1 ms apart — a false 1 ms "overlap" of a lease and its
 * successor (long run of 2026-12-03, seed 47). So: the narrowest bracket of 12 ticks, its middle.
 */
export function calibratedOffset(ticks = 12): number {
  let best = { width: Number.POSITIVE_INFINITY, offset: Date.now() - performance.now() };
  for (let i = 0; i < ticks; i++) {
    let before = performance.now();
    const start = Date.now();
    let d = start;
    let after = before;
    while (d === start) {
      before = after;
      d = Date.now();
      after = performance.now();
    }
    // The tick is between `before` (just before the last read that still saw `start`… or the one
    // after it) and `after` (just after the read that saw `d`).
    const width = after - before;
    if (width < best.width) best = { width, offset: d - (before + after) / 2 };
  }
  return best.offset;
}

const offset = calibratedOffset();

/** Wall-clock ms (fractional), monotonic within the process. */
export const wallNow = (): number => offset + performance.now();
