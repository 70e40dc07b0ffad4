import { median, quorumNames, vote } from './redlock-vote.js';
import { MasterLatency } from './redlock-latency.js';

interface Masters {
  /** Settle master i's answer: yes (true), no (false) or a failure. */
  answer(i: number, value: boolean | Error): void;
  ask(i: number): Promise<boolean>;
}

/** Five masters whose answers the test gives, one at a time (pure logic: no Redis here). */
function masters(): Masters {
  const settle: Array<(value: boolean | Error) => void> = [];
  return {
    answer: (i, value) => settle[i](value),
    ask: (i) =>
      new Promise((resolve, reject) => {
        settle[i] = (v) => (v instanceof Error ? reject(v) : resolve(v));
      }),
  };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the Redlock vote', () => {
  const start = (until?: 'yes' | 'answers') => {
    const m = masters();
    let settled: Awaited<ReturnType<typeof vote<boolean>>> | undefined;
    void vote(5, 3, m.ask, (v) => v, until).then((t) => (settled = t));
    return { ...m, settled: () => settled };
  };

  it('settles as soon as a majority says yes, leaving the others pending', async () => {
    const v = start();
    v.answer(0, true);
    v.answer(1, true);
    await flush();
    expect(v.settled()).toBeUndefined();
    v.answer(2, true);
    await flush();
    expect(v.settled()).toMatchObject({ yes: [0, 1, 2], pending: [3, 4] });
  });

  it('settles as "taken" once enough said no, unless the pending ones could still make it "unreachable"', async () => {
    const v = start();
    v.answer(0, false);
    v.answer(1, false);
    v.answer(2, false);
    await flush();
    expect(v.settled()).toMatchObject({ no: [0, 1, 2], failed: [], pending: [3, 4] });

    const w = start();
    w.answer(0, false);
    w.answer(1, false);
    w.answer(2, new Error('down'));
    await flush();
    // 2 no + 1 failed: no majority can say yes, but with both pending failing too it is "unreachable".
    expect(w.settled()).toBeUndefined();
    w.answer(3, new Error('down'));
    await flush();
    expect(w.settled()).toBeUndefined();
    w.answer(4, new Error('down'));
    await flush();
    expect(w.settled()).toMatchObject({ no: [0, 1], failed: [2, 3, 4], pending: [] });
  });

  it("'answers': settles once a majority answered at all, yes or no", async () => {
    const v = start('answers');
    v.answer(4, true);
    v.answer(3, false);
    v.answer(2, new Error('down'));
    await flush();
    expect(v.settled()).toBeUndefined();
    v.answer(1, false);
    await flush();
    expect(v.settled()).toMatchObject({ yes: [4], no: [3, 1], failed: [2], pending: [0] });
  });

  it('with patience: a contended try (a no) waits for the pending masters only that long, then is not a majority', async () => {
    const m = masters();
    let settled: Awaited<ReturnType<typeof vote<boolean>>> | undefined;
    const asked: number[][] = [];
    void vote(5, 3, m.ask, (v) => v, 'yes', (pending) => (asked.push(pending), 30)).then((t) => (settled = t));
    m.answer(0, true);
    m.answer(1, true);
    await flush();
    expect(asked).toEqual([]); // no "no" yet: the pending ones are waited for (each bounded by its own timeout)
    m.answer(2, false);
    await flush();
    expect(asked).toEqual([[3, 4]]);
    expect(settled).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 60));
    await flush(); // the patience decides after the sockets are read (afterPendingIo)
    expect(settled).toMatchObject({ yes: [0, 1], no: [2], failed: [], pending: [3, 4] });
  });

  it('with patience: fewer than a majority answered, the pending ones are waited for (their failures make it "unreachable", not "taken")', async () => {
    const m = masters();
    let settled: Awaited<ReturnType<typeof vote<boolean>>> | undefined;
    void vote(5, 3, m.ask, (v) => v, 'yes', () => 10).then((t) => (settled = t));
    m.answer(3, false);
    m.answer(4, false);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(settled).toBeUndefined();
    for (const i of [0, 1, 2]) m.answer(i, new Error('down'));
    await flush();
    expect(settled).toMatchObject({ no: [3, 4], failed: [0, 1, 2], pending: [] });
  });

  it('with patience: the pending masters answering in time still decide it', async () => {
    const m = masters();
    let settled: Awaited<ReturnType<typeof vote<boolean>>> | undefined;
    void vote(5, 3, m.ask, (v) => v, 'yes', () => 1_000).then((t) => (settled = t));
    m.answer(0, true);
    m.answer(1, false);
    m.answer(2, true);
    await flush();
    expect(settled).toBeUndefined();
    m.answer(4, true);
    await flush();
    expect(settled).toMatchObject({ yes: [0, 2, 4], no: [1], pending: [3] });
  });

  it("a master's usual answer time sets the patience: 4 times the slowest pending one, 25 ms at least, the per-master timeout at most", async () => {
    const latency = new MasterLatency(3, 200);
    expect(latency.patienceMs([0, 1])).toBe(25); // nothing known yet
    await latency.timed(0, new Promise((resolve) => setTimeout(resolve, 40)));
    await latency.timed(1, Promise.resolve());
    expect(latency.patienceMs([1])).toBe(25);
    expect(latency.patienceMs([0, 1])).toBeGreaterThanOrEqual(4 * 38);
    await latency.timed(2, new Promise((resolve) => setTimeout(resolve, 120)));
    expect(latency.patienceMs([2])).toBe(200);
    await latency.timed(1, Promise.reject(new Error('down'))).catch(() => undefined);
    expect(latency.patienceMs([1])).toBe(25); // a failure is no answer time
  });

  it('takes the median of what was reported', () => {
    expect(median([])).toBeUndefined();
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1])).toBe(4);
  });
});

describe('the names a majority of masters list', () => {
  it('keeps a name two of three masters list, not one a single master lists; each name once', () => {
    expect(quorumNames([['a', 'b', 'b'], ['b', 'a'], ['c']], 2, 10).sort()).toEqual(['a', 'b']);
  });

  it('a list cut at max: names fewer masters listed fill the rest, the majority ones first', () => {
    // Each master cut its list of the same five keys at two names of its own.
    expect(quorumNames([['k1', 'k2'], ['k3', 'k1'], ['k4', 'k5']], 2, 2)).toEqual(['k1', 'k2']);
    expect(quorumNames([['k1', 'k2'], ['k3', 'k4'], ['k5', 'k6']], 2, 2)).toHaveLength(2);
    // Lists shorter than max are whole: a name one master lists is a minority's.
    expect(quorumNames([['k1'], ['k2']], 2, 3)).toEqual([]);
  });
});
