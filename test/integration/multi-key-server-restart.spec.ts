import type { Lease } from '../../lib/index.js';
import { startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';

// Adversarial review: a multi-key acquisition that restarts from nothing (an earlier key was lost
// while it waited for a later one: here an operator's forceRelease) gives back the keys it held —
// but not its place in the queue of the key it was waiting for. That stale entry is then first in
// line for the later key, while its acquisition now queues for the FIRST key again: a cycle of
// waits with a caller holding the first key and waiting for the second (the promised "no deadlock"
// is broken until one of the waits runs out).

// Every backend that queues.
const CASES = EVERY_BACKEND;

describe.each(CASES)('multi-key restart on $name', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let a: LockApp;
  let b: LockApp;
  let c: LockApp;
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  beforeAll(async () => {
    running = await server();
    const o = running.options;
    [a, b, c] = await Promise.all([startLockApp(o), startLockApp(o), startLockApp(o)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b, c]) await app?.close();
    await running?.stop();
  });

  it('after a restart, the caller holding the first key gets the second as soon as its holder gives it back', async () => {
    const x = uniqueKey(`rv-mk-restart-${backend}-1x`);
    const y = uniqueKey(`rv-mk-restart-${backend}-2y`);
    expect(x < y).toBe(true);
    const blocker = await b.locks.acquire(y, opts({ ttl: 30_000 }));
    // A takes x, then queues for y.
    const aLease = a.locks.acquire([x, y], opts({ ttl: 1_500, wait: 10_000 })).then(
      (lease) => ({ lease, at: Date.now() }),
      (error: unknown) => ({ error, at: Date.now() }),
    );
    const waitersOf = async (key: string): Promise<number> => (await c.locks.inspect(key, { backend }))?.waiters ?? 0;
    await until(async () => (await waitersOf(y)) >= 1, 10_000, 'A queued for y');
    expect((await c.locks.inspect(x, { backend }))?.waiters).toBe(0);
    // An operator frees x; C takes it and queues for y behind A.
    expect(await c.locks.forceRelease(x, { backend })).toBe(true);
    const cLease = c.locks.acquire([x, y], opts({ ttl: 1_500, wait: 10_000 })).then(
      (lease) => ({ lease, at: Date.now() }),
      (error: unknown) => ({ error, at: Date.now() }),
    );
    // A's keep-alive (every ttl/3) finds x lost and restarts: it now queues for x (held by C).
    // Both in line before y is released: C for y, and A — its restart — for x behind C.
    await until(async () => (await waitersOf(x)) >= 1 && (await waitersOf(y)) >= 1, 10_000, 'A queued for x, C for y');
    const released = Date.now();
    await blocker.release();
    const first = await Promise.race([aLease, cLease]);
    const both = await Promise.all([aLease, cLease]);
    for (const r of both) if ('lease' in r) await (r.lease as Lease).release();
    // C holds x and only needs y, which nobody holds now: it must not wait for A's wait to run out.
    expect({ waitedMs: first.at - released, outcomes: both.map((r) => ('lease' in r ? 'lease' : String((r.error as Error).name))) }).toEqual({
      waitedMs: expect.any(Number),
      outcomes: ['lease', 'lease'],
    });
    expect(first.at - released).toBeLessThan(1_000);
  }, 30_000);
});
