import { HandOffWaiters } from './hand-off-waiters.js';

// The bookkeeping that lets a handed-off waiter start without a claim round trip: from when does
// its validity count, and which hand-off messages are refused.
describe('HandOffWaiters', () => {
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  it("counts a hand-off's validity from the first queue request, or (since: 'answer') from the latest request answered \"still queued\"", async () => {
    const waiters = new HandOffWaiters();
    waiters.joining('o');
    waiters.sending('o');
    const first = performance.now();
    waiters.queued('k', 'o', -1, 5n);
    await sleep(30);
    waiters.sending('o'); // a re-check
    const second = performance.now();
    waiters.queued('k', 'o', -1, 5n);
    waiters.handedOff('o', 10_000, 6n);
    const fromFirst = waiters.handOff('o', 8_000)!;
    const fromAnswer = waiters.handOff('o', 8_000, 'answer')!;
    expect(fromFirst.validFrom).toBeLessThanOrEqual(first);
    expect(second - fromFirst.validFrom).toBeGreaterThanOrEqual(25);
    expect(fromAnswer.validFrom).toBeGreaterThan(fromFirst.validFrom + 25);
    expect(fromAnswer.validFrom).toBeLessThanOrEqual(second);
    // The shorter of what the engine trusts and what the releasing side granted; the token with it.
    expect(fromAnswer.validForMs).toBe(8_000);
    expect(fromAnswer.token).toBe(6n);
    expect(waiters.handOff('o', 20_000, 'answer')!.validForMs).toBe(10_000);
  });

  it("since: 'answer', refuses a hand-off without a token or an answer's token bound, or whose token is not above that bound (a stale message), and one of too little validity", async () => {
    const waiters = new HandOffWaiters();
    waiters.joining('o');
    waiters.sending('o');
    waiters.queued('k', 'o', -1);
    waiters.handedOff('o', 10_000, 12n);
    expect(waiters.handOff('o', 10_000, 'answer')).toBeUndefined(); // no bound: nothing proves it fresh
    waiters.handedOff('o', 10_000);
    expect(waiters.handOff('o', 10_000, 'answer')).toBeUndefined(); // no token
    waiters.sending('o');
    waiters.queued('k', 'o', -1, 9n);
    waiters.handedOff('o', 10_000, 9n);
    expect(waiters.handOff('o', 10_000, 'answer')).toBeUndefined();
    waiters.handedOff('o', 10_000, 8n);
    expect(waiters.handOff('o', 10_000, 'answer')).toBeUndefined();
    waiters.handedOff('o', 10_000, 10n);
    expect(waiters.handOff('o', 10_000, 'answer')?.token).toBe(10n);
    // Half of a 40 ms reservation gone by: claim first instead.
    waiters.handedOff('o', 40, 11n);
    await sleep(30);
    expect(waiters.handOff('o', 10_000, 'answer')).toBeUndefined();
  });

  it('remembers a hand-off only for an owner it queued, and a wake that comes before the wait', async () => {
    const waiters = new HandOffWaiters();
    waiters.handedOff('stranger', 10_000, 3n);
    expect(waiters.hasHandOff('stranger')).toBe(false);
    waiters.joining('o');
    waiters.sending('o');
    waiters.handedOff('o', 10_000, 3n); // before the answer to its queue request arrived
    expect(waiters.hasHandOff('o')).toBe(true);
    const started = performance.now();
    await waiters.wait('o', 5_000);
    expect(performance.now() - started).toBeLessThan(100);
    waiters.forget('o');
    expect(waiters.isQueued('o')).toBe(false);
    expect(waiters.hasHandOff('o')).toBe(false);
  });
});
