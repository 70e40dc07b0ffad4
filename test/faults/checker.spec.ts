import { check, checkLeader, checkSemaphore, firstGrantAfter, tokensAcrossServerFaults, validityWindows, type HistoryEvent, type Register } from './checker.js';

const ev = (t: number, worker: number, e: HistoryEvent['e'], extra: Partial<HistoryEvent> = {}): HistoryEvent => ({ t, worker, e, ...extra });

describe('fault-run checker', () => {
  const clean: HistoryEvent[] = [
    ev(0, 1, 'acquiring'),
    ev(1, 1, 'acquired', { token: '5' }),
    ev(2, 1, 'write-ok', { el: 'a', token: '5' }),
    ev(3, 1, 'released'),
    ev(4, 2, 'acquiring'),
    ev(5, 2, 'acquired', { token: '7' }),
    ev(6, 2, 'write-ok', { el: 'b', token: '7' }),
    ev(7, 2, 'released'),
  ];
  const cleanRegister: Register = [['a', '5'], ['b', '7']];

  it('finds nothing wrong in a clean run', () => {
    expect(check(clean, cleanRegister, 1000)).toMatchObject({
      acquisitions: 2,
      acknowledgedWrites: 2,
      staleAccepted: 0,
      lostUpdates: 0,
      tokenRegressions: 0,
      overlaps: 0,
    });
  });

  it('counts an acknowledged element missing from the register as a lost update', () => {
    expect(check(clean, [['b', '7']], 1000).lostUpdates).toBe(1);
  });

  it('counts a write accepted below an earlier token as a stale write accepted', () => {
    expect(check(clean, [['b', '7'], ['a', '5']], 1000).staleAccepted).toBe(1);
  });

  it('counts a grant not above a lease that ended before it was requested as a token regression', () => {
    const regressed = clean.map((e) => (e.worker === 2 && e.token ? { ...e, token: '4' } : e));
    expect(check(regressed, [['a', '5'], ['b', '4']], 1000).tokenRegressions).toBe(1);
  });

  it('does not call it a regression when the grants were concurrent (requested before the other ended)', () => {
    const concurrent = [ev(0, 1, 'acquiring'), ev(0.5, 2, 'acquiring'), ev(1, 2, 'acquired', { token: '9' }), ev(2, 2, 'released'), ev(3, 1, 'acquired', { token: '8' })];
    expect(check(concurrent, [], 1000).tokenRegressions).toBe(0);
  });

  it('counts intersecting holding intervals of different workers as overlaps, and loss signal delays', () => {
    const overlapping = [
      ev(0, 1, 'acquired', { token: '1' }),
      ev(1000, 2, 'acquired', { token: '2' }),
      ev(1100, 1, 'lost', { reason: 'expired' }),
      ev(1200, 2, 'released'),
      ev(1300, 1, 'released'),
    ];
    const result = check(overlapping, [], 1000);
    expect(result.overlaps).toBe(1);
    expect(result.lossesSignalled).toBe(1);
    expect(result.signalDelayP50).toBe(100);
  });

  it('an overlap of validity windows is unexplained unless the overtaken holder was signalled the loss of its lease', () => {
    const overtaken = (lost: boolean): HistoryEvent[] => [
      ev(0, 1, 'acquired', { token: '1', validUntil: 1000 }),
      ev(500, 2, 'acquired', { token: '2', validUntil: 1500 }),
      ...(lost ? [ev(600, 1, 'lost', { reason: 'expired' })] : []),
      ev(700, 2, 'released'),
      ev(1200, 1, 'releasing'),
    ];
    expect(check(overtaken(false), [], 1000)).toMatchObject({ overlaps: 1, validityOverlaps: 1, unexplainedOverlaps: 1 });
    expect(check(overtaken(true), [], 1000)).toMatchObject({ overlaps: 1, validityOverlaps: 1, unexplainedOverlaps: 0 });
  });

  it("an overlap shorter than the processes' clocks agree (fractions of a ms) is not counted; a real one is", () => {
    // Seen in a full run (pg-network): the next holder's 'acquired' stamped 0.17 ms before the
    // previous holder's 'releasing', which comes first in fact (the release is what granted it).
    const handOver = (gapMs: number): HistoryEvent[] => [
      ev(0, 1, 'acquired', { token: '1', validUntil: 1000 }),
      ev(300 - gapMs, 2, 'acquired', { token: '2', validUntil: 1300 }),
      ev(300, 1, 'releasing'),
      ev(302, 1, 'released'),
      ev(600, 2, 'releasing'),
    ];
    expect(check(handOver(0.17), [], 1000)).toMatchObject({ validityOverlaps: 0, unexplainedOverlaps: 0 });
    expect(check(handOver(10), [], 1000)).toMatchObject({ validityOverlaps: 1, unexplainedOverlaps: 1 });
  });

  it('a holder still acting past its validity end overlaps in holding, not in validity (a paused holder overtaken in time)', () => {
    const paused = [
      ev(0, 1, 'acquired', { token: '1', validUntil: 990 }),
      ev(1000, 2, 'acquired', { token: '2', validUntil: 2000 }),
      ev(1100, 2, 'released'),
      ev(3000, 1, 'releasing'),
    ];
    expect(check(paused, [], 1000)).toMatchObject({ overlaps: 1, validityOverlaps: 0, unexplainedOverlaps: 0 });
  });

  it('a worker killed while holding holds nothing afterwards, and its token bounds later grants', () => {
    const killed = [
      ev(0, 1, 'acquired', { token: '5', validUntil: 1000 }),
      ev(100, 1, 'killed'),
      ev(200, 2, 'acquiring'),
      ev(1100, 2, 'acquired', { token: '4', validUntil: 2100 }),
      ev(1200, 2, 'released'),
    ];
    expect(check(killed, [], 1000)).toMatchObject({ overlaps: 0, validityOverlaps: 0, tokenRegressions: 1 });
  });

  it('holds grants asked for after a server fault to tokens above every token granted before it', () => {
    // Worker 1 holds 8 (still holding: check() has no ended lease to compare with) when the server is
    // killed; worker 2 asks after the relaunch. A counter that lost its place issues 6.
    const run = (after: string, askedAt: number): HistoryEvent[] => [
      ev(0, 1, 'acquiring'),
      ev(1, 1, 'acquired', { token: '8' }),
      ev(askedAt, 2, 'acquiring'),
      ev(askedAt + 50, 2, 'acquired', { token: after }),
    ];
    const fault = { t: 100, end: 1_000, kind: 'kill -9 MariaDB + relaunch' };
    expect(check(run('6', 1_500), [], 1000).tokenRegressions).toBe(0);
    expect(tokensAcrossServerFaults(run('6', 1_500), [fault])).toMatchObject({ faults: 1, grantsChecked: 1, regressions: 1, first: { before: '8', after: '6', worker: 2 } });
    expect(tokensAcrossServerFaults(run('9', 1_500), [fault])).toEqual({ faults: 1, grantsChecked: 1, regressions: 0 });
    // Asked for before the fault ended: not compared (it may have been granted before the fault).
    expect(tokensAcrossServerFaults(run('6', 500), [fault])).toEqual({ faults: 0, grantsChecked: 0, regressions: 0 });
    // Compared across one fault only: the one that ended last before the grant was asked for.
    const later = { t: 1_200, end: 1_400, kind: 'MariaDB restart' };
    expect(tokensAcrossServerFaults(run('9', 1_500), [fault, later])).toEqual({ faults: 1, grantsChecked: 1, regressions: 0 });
  });

  it('measures how long after a moment the next grant came, to anyone', () => {
    expect(firstGrantAfter(clean, 2)).toBe(3);
    expect(firstGrantAfter(clean, 5)).toBeUndefined();
  });

  describe('semaphores', () => {
    // Three holders of a 2-permit key; worker 3 is granted while 1 and 2 are both valid.
    const threeAtOnce = (lostFirst: boolean): HistoryEvent[] => [
      ev(0, 1, 'acquiring'),
      ev(1, 1, 'acquired', { token: '10', validUntil: 1001 }),
      ev(2, 2, 'acquiring'),
      ev(3, 2, 'acquired', { token: '11', validUntil: 1003 }),
      ev(4, 3, 'acquiring'),
      ...(lostFirst ? [ev(400, 1, 'lost', { reason: 'expired' })] : []),
      ev(500, 3, 'acquired', { token: '12', validUntil: 1500 }),
      ev(600, 3, 'act'),
      ev(610, 3, 'releasing'),
      ev(700, 2, 'act'),
      ev(710, 2, 'releasing'),
      ev(2000, 1, 'act'),
      ev(2010, 1, 'releasing'),
    ];

    it('counts a grant that makes permits + 1 holders valid at once as over-admission', () => {
      const r = checkSemaphore(threeAtOnce(false), 1000, 2);
      expect(r).toMatchObject({ acquisitions: 3, overAdmission: 1, maxHolders: 3, tokenDuplicates: 0, tokenRegressions: 0 });
      expect(r.firstOverAdmission?.holders.map((h) => h.worker).sort()).toEqual([1, 2, 3]);
      expect(checkSemaphore(threeAtOnce(false), 1000, 3).overAdmission).toBe(0);
    });

    it('a holder told it lost its permit is no longer counted, and its late act counts as acting after expiry', () => {
      const r = checkSemaphore(threeAtOnce(true), 1000, 2);
      expect(r).toMatchObject({ overAdmission: 0, maxHolders: 2, actedAfterExpiry: 1, lossesSignalled: 1, overAdmissionAtPermitsMinus1: 2 });
    });

    it('a paused holder past its validity end does not count, though it acts after resuming', () => {
      const paused = [
        ev(0, 1, 'acquired', { token: '1', validUntil: 990 }),
        ev(10, 2, 'acquired', { token: '2', validUntil: 1010 }),
        ev(1000, 3, 'acquired', { token: '3', validUntil: 2000 }),
        ev(1100, 3, 'releasing'),
        ev(3000, 1, 'lost', { reason: 'expired' }),
        ev(3001, 1, 'act'),
        ev(3002, 1, 'releasing'),
        ev(3003, 2, 'releasing'),
      ];
      // Worker 2's window (to 1010) and 3's (from 1000) overlap with 1's over by then: 2 at once.
      expect(checkSemaphore(paused, 1000, 2)).toMatchObject({ overAdmission: 0, maxHolders: 2, actedAfterExpiry: 1 });
    });

    it('counts a token granted twice, and a grant not above a token granted before its holder asked', () => {
      const dup = [ev(0, 1, 'acquired', { token: '5' }), ev(1, 2, 'acquiring'), ev(2, 2, 'acquired', { token: '5' })];
      expect(checkSemaphore(dup, 1000, 2)).toMatchObject({ tokenDuplicates: 1, tokenRegressions: 1 });
      const concurrent = [ev(0, 1, 'acquiring'), ev(1, 2, 'acquiring'), ev(2, 2, 'acquired', { token: '6' }), ev(3, 1, 'acquired', { token: '5' })];
      expect(checkSemaphore(concurrent, 1000, 2)).toMatchObject({ tokenDuplicates: 0, tokenRegressions: 0 });
    });
  });

  describe('leader terms', () => {
    it("a term's window follows its renewals; reports with no time left (remainingMs 0) do not extend it", () => {
      const term = [
        ev(0, 1, 'acquired', { token: '1', validUntil: 1000 }),
        ev(300, 1, 'renewed', { validUntil: 1300 }),
        ev(600, 1, 'read', { validUntil: 1600 }),
        ev(5000, 1, 'read', { validUntil: 5000 }),
        ev(5001, 1, 'lost'),
        ev(5002, 1, 'releasing'),
      ];
      expect(validityWindows(term, 1000)).toMatchObject([{ worker: 1, start: 0, end: 1600, lost: true }]);
    });

    it('counts two leaders within their validity at one instant as a term overlap; a paused leader resuming is a late act', () => {
      const terms = (renewedLate: boolean): HistoryEvent[] => [
        ev(0, 1, 'acquired', { token: '10', validUntil: 1000 }),
        ev(100, 1, 'write-ok', { el: 'a', token: '10' }),
        ev(110, 1, 'read', { validUntil: 1110 }),
        ...(renewedLate ? [ev(120, 1, 'renewed', { validUntil: 2500 })] : []),
        // paused here; worker 2 leads at 2000
        ev(2000, 2, 'acquired', { token: '20', validUntil: 3000 }),
        ev(2100, 2, 'write-ok', { el: 'b', token: '20' }),
        ev(3000, 1, 'write-stale', { el: 'c', token: '10' }),
        ev(3001, 1, 'lost'),
        ev(3002, 1, 'releasing'),
      ];
      const pause = { t: 150, end: 3000, kind: 'SIGSTOP leader', worker: 1 };
      expect(checkLeader(terms(false), 1000, [pause])).toMatchObject({ terms: 2, termOverlaps: 0, actedAfterExpiry: 1, tokenRegressions: 0, handOvers: { 'SIGSTOP leader': [1850] } });
      const overlapping = checkLeader(terms(true), 1000, [pause]);
      expect(overlapping.termOverlaps).toBe(1);
      expect(overlapping.firstTermOverlap?.holders.map((h) => h.token)).toEqual(['10', '20']);
    });

    it('counts a term whose token is not above an earlier term as a regression, and a fault with no next leader', () => {
      const regressed = [ev(0, 1, 'acquired', { token: '10' }), ev(100, 1, 'releasing'), ev(200, 2, 'acquired', { token: '9' }), ev(300, 2, 'releasing')];
      expect(checkLeader(regressed, 1000, [{ t: 250, kind: 'kill', worker: 2 }])).toMatchObject({ tokenRegressions: 1, noHandOver: 1 });
    });
  });
});
