import { check, type HistoryEvent, type Register } from './checker.js';

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
});
