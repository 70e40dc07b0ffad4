/**
 * A wall clock with sub-millisecond resolution that processes on one machine agree on:
 * Date.now() calibrated once, at the moment it ticks, against performance.now(). (Node's
 * performance.timeOrigin is off by up to ~2 ms from process to process; this is off by µs.)
 */
export function calibratedOffset(): number {
  const samples: number[] = [];
  for (let i = 0; i < 3; i++) {
    const start = Date.now();
    let d: number;
    let p: number;
    do {
      p = performance.now();
      d = Date.now();
    } while (d === start);
    samples.push(d - p);
  }
  return samples.sort((a, b) => a - b)[1];
}

const offset = calibratedOffset();

/** Wall-clock ms (fractional), monotonic within the process. */
export const wallNow = (): number => offset + performance.now();
