import { monotonicNow } from '../common/validity.util.js';
import { LeaseExpiry } from './lease-expiry.js';

describe('LeaseExpiry', () => {
  it('a timer that fires before the deadline while a request is in flight is armed again: the lease still expires', async () => {
    // Node counts timers in whole ms: against a fractional monotonic deadline a timer fires up to
    // ~1 ms early (a helper's measurement: 25 of 1,000). Modelled here by moving the deadline on
    // after the timer was armed. Before the fix the recheck found it too early and did nothing —
    // the lease never expired while its extend failed or never came back.
    let expiredAt: number | undefined;
    const expiry = new LeaseExpiry(() => (expiredAt = monotonicNow()));
    expiry.lengthen(new Promise(() => undefined)); // an extend that never answers
    const deadline = monotonicNow() + 30;
    expiry.set(monotonicNow() + 5);
    (expiry as unknown as { at: number }).at = deadline; // the timer will come due 25 ms too early
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // a bound on when, with room for a loaded machine
    expect(expiredAt).toBeDefined();
    expect(expiredAt!).toBeGreaterThanOrEqual(deadline);
  });

  it('due with nothing in flight: expires at once; a request answered before the recheck that moved the deadline keeps it', async () => {
    const fired: string[] = [];
    const plain = new LeaseExpiry(() => fired.push('plain'));
    plain.set(monotonicNow() - 1); // already past: synchronously
    expect(fired).toEqual(['plain']);

    const lengthened = new LeaseExpiry(() => fired.push('lengthened'));
    let answer!: () => void;
    lengthened.lengthen(new Promise<void>((resolve) => (answer = resolve))).then(() => lengthened.set(monotonicNow() + 10_000));
    lengthened.set(monotonicNow() + 5);
    setImmediate(() => answer()); // the answer, read in the turn the timer comes due (before the recheck)
    const busyUntil = monotonicNow() + 20;
    while (monotonicNow() < busyUntil) {
      // a busy loop past the deadline: timer and answer due together
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(fired).toEqual(['plain']);
    lengthened.clear();
  });
});
