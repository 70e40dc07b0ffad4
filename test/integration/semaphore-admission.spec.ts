import type { Lease } from '../../lib/index.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';

// Every backend that serves semaphores, every topology: callers in three applications race single
// tries for a semaphore's places. What a user would notice: more holders than permits, two holders
// with one token, a refused try left in the line (it would hold back the callers after it), or
// anything left of the key once its holders are gone. (The per-backend semaphore specs look at the
// server's own records beside this.)

describe.each(backendCases((c) => c.semaphores))('semaphore admission on $name', ({ backend, purpose, fencing, server }) => {
  let running: BackendServer;
  let apps: LockApp[] = [];
  beforeAll(async () => {
    running = await server();
    apps = await Promise.all([0, 1, 2].map(() => (async () => startLockApp((await running.another?.()) ?? running.options))()));
  }, 90_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await running?.stop();
  });

  it('20 single tries from 3 applications for 3 permits, three rounds: exactly 3 leases, distinct tokens, nothing of the refused left', async () => {
    for (let round = 0; round < 3; round++) {
      // Braces, a colon and non-ASCII: a hash tag, a path and an encoding must all keep it one key.
      const key = uniqueKey(`{sem}:ключ:🔑:${round}`);
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => apps[i % 3].locks.tryAcquire(key, { purpose, backend, permits: 3, ttl: 20_000 })));
      const leases = results.filter((lease): lease is Lease => lease !== null);
      expect(leases).toHaveLength(3);
      if (fencing) expect(new Set(leases.map((lease) => String(lease.token))).size).toBe(3);
      // The refused are out of the line (some backends take their entry out just after the answer).
      await until(async () => (await apps[0].locks.inspect(key, { backend }))?.waiters === 0, 5_000, 'the refused tries out of the line');
      expect(await apps[0].locks.inspect(key, { backend })).toMatchObject({ permits: 3, holders: 3, waiters: 0 });
      for (const lease of leases) await lease.release();
      expect(await apps[1].locks.inspect(key, { backend })).toBeNull();
      // Free for anyone, in any shape: a plain lock takes it at once.
      const plain = await apps[2].locks.tryAcquire(key, { purpose, backend, ttl: 5_000 });
      expect(plain).not.toBeNull();
      await plain!.release();
    }
  }, 60_000);
});
