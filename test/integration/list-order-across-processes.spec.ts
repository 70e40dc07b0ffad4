import { freshPostgres, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review of list()'s "newest first, at most limit". newestFirst() ranks every entry
// with a heldForMs (this process's own holds) before every entry without one, whatever their
// age: on PostgreSQL, whose tokens come from one sequence (a larger token is a later grant, and
// list() reports both entries' tokens), the process that asks sees its own hour-old hold as
// "newer" than a grant another replica got a moment ago — and `limit` cuts the newest one off.

describe('list() newest first across this process and another (PostgreSQL)', () => {
  let running: BackendServer;
  let mine: LockApp;
  let other: LockApp;
  beforeAll(async () => {
    running = await freshPostgres();
    [mine, other] = await Promise.all([startLockApp(running.options), startLockApp(running.options)]);
  }, 60_000);
  afterAll(async () => {
    await mine?.close();
    await other?.close();
    await running?.stop();
  });

  it('the later grant comes first, whichever process holds it', async () => {
    const p = `${uniqueKey('review-order')}/`;
    const old = await mine.locks.acquire(`${p}old`, { purpose: 'correctness', ttl: 30_000 });
    await sleep(300);
    const fresh = await other.locks.acquire(`${p}new`, { purpose: 'correctness', ttl: 30_000 });
    try {
      expect(fresh.token! > old.token!).toBe(true);
      // Seen from the other process (no local knowledge of `old`): newest first.
      expect((await other.locks.list({ backend: 'postgres' }, { prefix: p })).map((i) => i.key)).toEqual([`${p}new`, `${p}old`]);
      // Seen from this process: both tokens are reported, the later grant is `new`...
      const listed = await mine.locks.list({ backend: 'postgres' }, { prefix: p });
      expect(listed.map((i) => [i.key, i.token])).toEqual(expect.arrayContaining([[`${p}new`, fresh.token], [`${p}old`, old.token]]));
      // ...so newest first is `new` first, and limit 1 is `new`.
      expect(listed.map((i) => i.key)).toEqual([`${p}new`, `${p}old`]);
      expect((await mine.locks.list({ backend: 'postgres' }, { prefix: p, limit: 1 })).map((i) => i.key)).toEqual([`${p}new`]);
    } finally {
      await old.release();
      await fresh.release();
    }
  }, 60_000);
});
