import { AnswerDeadlines } from './answer-deadlines.js';

const never = <T>(): Promise<T> => new Promise<T>(() => undefined);
const after = <T>(ms: number, value: T): Promise<T> => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));
const mapped = (error: unknown): unknown => new Error(`mapped: ${(error as Error).message}`);

describe('AnswerDeadlines (one timer for the answer deadlines of a backend\'s calls)', () => {
  it('passes answers through, rejects the unanswered at their own deadline, in order', async () => {
    const deadlines = new AnswerDeadlines(100);
    const started = performance.now();
    const first = deadlines.bound(never<string>(), () => new Error('first timed out'), mapped);
    await after(40, undefined);
    const answered = deadlines.bound(after(10, 'ok'), () => new Error('no'), mapped);
    const second = deadlines.bound(never<string>(), () => new Error('second timed out'), mapped);
    await expect(answered).resolves.toBe('ok');
    const firstAt = await first.catch((error: Error) => ({ error, at: performance.now() - started }));
    const secondAt = await second.catch((error: Error) => ({ error, at: performance.now() - started }));
    expect((firstAt as { error: Error }).error.message).toBe('mapped: first timed out');
    expect((secondAt as { error: Error }).error.message).toBe('mapped: second timed out');
    expect((firstAt as { at: number }).at).toBeGreaterThanOrEqual(99);
    expect((secondAt as { at: number }).at).toBeGreaterThanOrEqual(139);
    expect((secondAt as { at: number }).at).toBeLessThan(400);
  });

  it('maps a rejected answer once, and an answer after its deadline changes nothing', async () => {
    const deadlines = new AnswerDeadlines(50);
    await expect(deadlines.bound(Promise.reject(new Error('refused')), () => new Error('late'), mapped)).rejects.toThrow('mapped: refused');
    let mappedCount = 0;
    const late = deadlines.bound(after(120, 'too late'), () => new Error('timed out'), (e) => (mappedCount += 1, e));
    await expect(late).rejects.toThrow('timed out');
    await after(100, undefined);
    expect(mappedCount).toBe(1);
  });

  it('many calls in flight: each answered one resolves, the rest time out, and nothing is kept afterwards', async () => {
    const deadlines = new AnswerDeadlines(60);
    // Answered out of order (chains of different depths) but long before the deadline, however slow the machine.
    const answer = (i: number): Promise<number> => Array.from({ length: i % 7 }).reduce<Promise<number>>((p) => p.then((v) => v), Promise.resolve(i));
    const calls = Array.from({ length: 3000 }, (_, i) => deadlines.bound(i % 3 === 0 ? never<number>() : answer(i), () => new Error('t'), (e) => e));
    const results = await Promise.allSettled(calls);
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1000);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(2000);
    const inner = deadlines as unknown as { queue: unknown[]; unsettled: number };
    expect(inner.unsettled).toBe(0);
    expect(inner.queue).toHaveLength(0);
  });
});
