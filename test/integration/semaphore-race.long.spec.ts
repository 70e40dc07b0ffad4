import { InvalidLockOptionsError, LockBusyError, type Lease } from '../../lib/index.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 4: semaphore races. Several applications (each its own
// clients) hammer one key: (a) all with permits 3 — never more than 3 trusted holders; (b) callers
// with permits 1, 2 and 3 racing on the same key from free — never two groups at once: every
// trusted holder at a moment asked for the same permits p, and there are at most p of them.
// A holder leaves the "trusted" set before its release() is sent, so a release in flight cannot
// make a false alarm; the ttl (20 s) never runs out during the test.

const CASES = EVERY_BACKEND.filter((c) => c.semaphores);

const APPS = 4;
const CALLERS_PER_APP = 3;
const DURATION_MS = 6_000;

describe.each(CASES)('semaphore races on $backend', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let apps: LockApp[];
  beforeAll(async () => {
    running = await server();
    apps = await Promise.all(Array.from({ length: APPS }, () => startLockApp(running.options)));
  }, 90_000);
  afterAll(async () => {
    for (const app of apps ?? []) await app.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  const hammer = async (key: string, permitsOf: (caller: number, round: number) => number, tag: string): Promise<{ findings: string[]; grants: number; mismatches: number }> => {
    const trusted = new Set<{ lease: Lease; permits: number; caller: number }>();
    const findings: string[] = [];
    let grants = 0;
    let mismatches = 0;
    const end = Date.now() + DURATION_MS;
    const check = (when: string): void => {
      const live = [...trusted].filter((h) => !h.lease.signal.aborted && h.lease.remainingMs() > 0);
      const kinds = new Set(live.map((h) => h.permits));
      const min = Math.min(...live.map((h) => h.permits));
      if (kinds.size > 1 || live.length > min) {
        findings.push(`${tag} ${when}: ${live.length} trusted holders with permits [${live.map((h) => h.permits).join(',')}] (callers ${live.map((h) => h.caller).join(',')})`);
      }
    };
    await Promise.all(
      Array.from({ length: APPS * CALLERS_PER_APP }, async (_, caller) => {
        const app = apps[caller % APPS];
        for (let round = 0; Date.now() < end; round++) {
          const permits = permitsOf(caller, round);
          let lease: Lease;
          try {
            lease = await app.locks.acquire(key, { purpose, backend, ttl: 20_000, wait: 1_500, ...(permits > 1 ? { permits } : {}) });
          } catch (error) {
            if (error instanceof InvalidLockOptionsError) mismatches += 1;
            else if (!(error instanceof LockBusyError)) findings.push(`${tag} caller ${caller}: ${(error as Error).name}: ${(error as Error).message}`);
            await sleep(5 + (caller % 5));
            continue;
          }
          grants += 1;
          const h = { lease, permits, caller };
          trusted.add(h);
          check(`grant to caller ${caller} (permits ${permits})`);
          await sleep((caller * 7 + round * 3) % 25);
          check(`before caller ${caller} releases`);
          trusted.delete(h);
          await lease.release().catch(() => undefined);
          if (findings.length > 20) return;
        }
      }),
    );
    return { findings, grants, mismatches };
  };

  it('permits 3 for everyone: never more than 3 trusted holders', async () => {
    const r = await hammer(uniqueKey(`adv2-sem3-${backend}`), () => 3, 'same');
    expect(r.grants).toBeGreaterThan(10);
    expect(r.findings).toEqual([]);
  }, 60_000);

  it('permits 1, 2 and 3 racing on one key: never two groups, never more than p', async () => {
    // Each caller changes its permits every round: the groups must take turns through the key being free.
    const r = await hammer(uniqueKey(`adv2-semmix-${backend}`), (caller, round) => 1 + ((caller + round) % 3), 'mixed');
    expect(r.grants).toBeGreaterThan(5);
    expect(r.findings).toEqual([]);
  }, 60_000);
});
