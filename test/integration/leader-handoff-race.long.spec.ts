import type { Lease } from '../../lib/index.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 5: leader hand-off races. Three applications run the
// README's loop (campaign, lead until the term's signal aborts) on one name; each term steps down
// after a short while — by aborting the campaign's signal, or by release() — and (second test) an
// operator in one of the campaigning apps force-releases the name every ~250 ms.
// Checked at every grant: no other term trusted (signal not aborted, remainingMs() > 0).
// A forced leader in ANOTHER app learns through its backend's notice, which may come a little
// after the next leader's grant (the README: at once, but it travels): such overlaps are counted
// apart and only reported when longer than 150 ms; a forced leader in the calling app must be told
// before forceRelease() returns, and a stepped-down one before its key is free — those are strict.

const CASES = EVERY_BACKEND;

const DURATION_MS = 6_000;

describe.each(CASES)('leader hand-off races on $backend', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let apps: LockApp[];
  beforeAll(async () => {
    running = await server();
    apps = await Promise.all([0, 1, 2].map(() => startLockApp(running.options)));
  }, 90_000);
  afterAll(async () => {
    for (const app of apps ?? []) await app.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  const race = async (force: boolean): Promise<{ strict: string[]; notices: number[]; terms: number }> => {
    const name = uniqueKey(`adv2-leader-${backend}`);
    const terms = new Map<Lease, { app: number; forcedAt?: number }>();
    const strict: string[] = [];
    const notices: number[] = [];
    let count = 0;
    /** When the operator's forceRelease() in flight was sent, and when the last one returned. */
    let forcing: number | undefined;
    let lastForced = Number.NEGATIVE_INFINITY;
    const end = Date.now() + DURATION_MS;
    const loop = async (i: number): Promise<void> => {
      for (let n = 0; Date.now() < end; n++) {
        const stop = new AbortController();
        let term: Lease;
        try {
          term = await apps[i].locks.campaign(name, { purpose, backend, ttl: 1_500, signal: stop.signal });
        } catch (error) {
          strict.push(`app ${i}: campaign failed: ${(error as Error).name}: ${(error as Error).message}`);
          await sleep(100);
          continue;
        }
        count += 1;
        const now = performance.now();
        for (const [other, info] of terms) {
          if (other.signal.aborted || other.remainingMs() <= 0) continue;
          if (info.forcedAt !== undefined) notices.push(now - info.forcedAt);
          else if (forcing !== undefined) notices.push(now - forcing);
          else if (now - lastForced < 150) notices.push(now - lastForced);
          else strict.push(`app ${i} granted a term while app ${info.app}'s term is trusted (${info.forcedAt === undefined ? 'not force-released' : 'force-released by its own app'}; remainingMs ${Math.round(other.remainingMs())})`);
        }
        terms.set(term, { app: i });
        await sleep(20 + ((i * 13 + n * 7) % 60));
        terms.delete(term);
        if (n % 2 === 0) stop.abort();
        else await term.release();
        if (!term.signal.aborted) strict.push(`app ${i}: stepped down (${n % 2 === 0 ? 'signal' : 'release()'}) but its term's signal did not abort`);
      }
    };
    const operator = async (): Promise<void> => {
      while (force && Date.now() < end) {
        await sleep(250);
        const leaders = [...terms.entries()];
        forcing = performance.now();
        const forced = await apps[0].locks.forceRelease(name, { backend }).catch(() => false);
        const at = performance.now();
        forcing = undefined;
        lastForced = at;
        if (!forced) continue;
        // A term granted while the call was in flight may be the one it ended: every term of the
        // moment of return counts as (possibly) force-released too.
        for (const [lease, info] of [...leaders, ...terms.entries()]) {
          if (lease.signal.aborted) continue;
          if (info.app === 0 && leaders.some(([l]) => l === lease)) strict.push(`forceRelease() in app 0 returned, app 0's own term not told`);
          else info.forcedAt ??= at;
        }
      }
    };
    await Promise.all([loop(0), loop(1), loop(2), operator()]);
    return { strict, notices, terms: count };
  };

  it('step-downs only (signal, release()): never two trusted leaders', async () => {
    const r = await race(false);
    expect(r.terms).toBeGreaterThan(10);
    expect(r.strict).toEqual([]);
  }, 60_000);

  it('with an operator force-releasing the name: never two trusted leaders but for a notice in flight (≤ 150 ms)', async () => {
    const r = await race(true);
    expect(r.terms).toBeGreaterThan(5);
    const slow = r.notices.filter((ms) => ms > 150).map((ms) => `a force-released leader in another app still trusted ${ms.toFixed(0)} ms after forceRelease() returned, beside the next leader`);
    if (r.notices.length) console.log(`[adv2 ${backend}] notice-in-flight overlaps (ms): ${r.notices.map((n) => n.toFixed(1)).join(', ')}`);
    expect([...r.strict, ...slow]).toEqual([]);
  }, 60_000);
});
