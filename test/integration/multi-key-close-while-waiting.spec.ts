import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Round 3, defect 2 (MAJOR, adversarial report): app.close() while a multi-key acquisition holds
// its first keys and waits for the last. The acquisition rejects ("shutting down"), and the README
// promises it leaves none of its keys held ("a caller that gives up … leaves none of them held";
// Shutdown: "a clean stop leaves no key behind"). Today the give-back of the taken keys races the
// backend's close: on PostgreSQL even with 2 keys, on Redis with 100 (past the first batch of 64),
// the keys stay held for their whole ttl (30 s here). etcd (the session lease is revoked) and
// ZooKeeper (the session ends) are regression cases: they pass today.

/** Keys A asks for (B holds the last), per backend: past its one-request batch where it has one. A backend not named here: 2 and 10. */
const COUNTS: Record<string, number[]> = { redis: [100], etcd: [2, 100] };

// Every backend that queues.
const CASES = EVERY_BACKEND.flatMap((c) => (COUNTS[c.name] ?? [2, 10]).map((count) => ({ ...c, count })));

async function eventually(check: () => Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(10);
  }
}

describe.each(CASES)('close() while a multi-key acquisition waits for its last key ($name, $count keys)', ({ backend, purpose, count, server }) => {
  let running: BackendServer;
  let b: LockApp;
  let c: LockApp;
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  beforeAll(async () => {
    running = await server();
    [b, c] = await Promise.all([startLockApp(running.options), startLockApp(running.options)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [b, c]) await app?.close();
    await running?.stop();
  });

  it('every key it had taken is free for another application within 1 s of close() returning', async () => {
    const a = await startLockApp(running.options);
    const base = uniqueKey(`r3-close-leak-${backend}-${count}`);
    const keys = Array.from({ length: count }, (_, i) => `${base}:${String(i).padStart(4, '0')}`);
    const taken = keys.slice(0, -1);
    const blocker = await b.locks.acquire(keys[count - 1], opts({ ttl: 30_000 }));
    try {
      const pending = a.locks.acquire(keys, opts({ ttl: 30_000, wait: 20_000 })).then(
        () => 'granted',
        (error: Error) => `${error.name}: ${error.message}`,
      );
      // A holds every key but the last, and waits for the last (B holds it).
      await eventually(async () => (await c.locks.inspect(taken[taken.length - 1], { backend })) !== null, 15_000, 'A holding every key but the last');
      expect(await c.locks.inspect(keys[0], { backend })).not.toBeNull();
      // ...and is queued for the last one when its app closes.
      await eventually(async () => ((await c.locks.inspect(keys[count - 1], { backend }))?.waiters ?? 0) >= 1, 15_000, 'A queued for the last key');
      const closedAt = Date.now();
      await a.close();
      const closeMs = Date.now() - closedAt;
      expect(await pending).toMatch(/shutting down/);
      // Within 1 s: none of the keys A had taken is still held.
      let held: string[] = [...taken];
      const deadline = Date.now() + 1_000;
      for (;;) {
        const still: string[] = [];
        for (const key of held) if (await c.locks.inspect(key, { backend })) still.push(key);
        held = still;
        if (held.length === 0 || Date.now() > deadline) break;
        await sleep(50);
      }
      const stillFirst = held.length > 0 ? await c.locks.inspect(held[0], { backend }) : null;
      // And C can take them.
      const probe = await c.locks.tryAcquire(keys[0], opts({ ttl: 5_000 }));
      await probe?.release();
      expect({
        closeMs: closeMs < 10_000,
        heldAfterClose: held.length === 0 ? 'none' : `${held.length} of ${taken.length} (first: ${held[0]}, ${stillFirst?.remainingMs} ms left)`,
        cTakesKeys0: probe !== null,
      }).toEqual({ closeMs: true, heldAfterClose: 'none', cTakesKeys0: true });
    } finally {
      await blocker.release();
      await a.close();
    }
  }, 60_000);
});
