import { check, firstGrantAfter, type HistoryEvent, type Register } from './checker.js';

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

  it('measures how long after a moment the next grant came, to anyone', () => {
    expect(firstGrantAfter(clean, 2)).toBe(3);
    expect(firstGrantAfter(clean, 5)).toBeUndefined();
  });
});
