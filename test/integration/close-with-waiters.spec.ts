import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 2: app.close() of an application X while many of its
// callers wait — plain keys, multi-key leases (holding their first keys), semaphore waiters,
// campaign candidates — and while X itself holds a semaphore permit and leads a campaign.
// Must hold: close() returns within a few seconds; once it has, X holds nothing and waits for
// nothing (no queue entry, no key): when H gives its keys back, every key is free for another app.

const CASES = backendCases((c) => !c.cluster);

const CLOSE_WITHIN_MS = 5_000;
/** A timer that does not keep jest running. */
const after = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());
const N = 12;

describe.each(CASES)('close() while many callers wait ($name)', ({ backend, purpose, server, semaphores }) => {
  let running: BackendServer;
  let h: LockApp;
  let x: LockApp;
  let probe: LockApp;
  beforeAll(async () => {
    running = await server();
    [h, x, probe] = await Promise.all([startLockApp(running.options), startLockApp(running.options), startLockApp(running.options)]);
  }, 90_000);
  afterAll(async () => {
    for (const app of [h, x, probe]) await app?.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  it(`close() returns within ${CLOSE_WITHIN_MS} ms and leaves nothing held or queued`, async () => {
    const opts = (more: object = {}) => ({ purpose, backend, ...more });
    const base = uniqueKey(`adv2-close-${backend}`);
    const plain = Array.from({ length: N }, (_, i) => `${base}:p${i}`);
    const multi = Array.from({ length: N }, (_, i) => [`${base}:m${i}:a`, `${base}:m${i}:b`, `${base}:m${i}:c`]);
    const sem = `${base}:sem`;
    const campaignName = `${base}:leader`;
    const campaignName2 = `${base}:leader2`;
    // H holds every plain key and every multi-key set's last key; a semaphore of 2 (one permit each);
    // H leads campaignName; X leads campaignName2.
    const hHolds = await Promise.all([...plain, ...multi.map((m) => m[2])].map((k) => h.locks.acquire(k, opts({ ttl: 60_000 }))));
    const hSem = semaphores ? await h.locks.acquire(sem, opts({ ttl: 60_000, permits: 2 })) : undefined;
    const xSem = semaphores ? await x.locks.acquire(sem, opts({ ttl: 60_000, permits: 2 })) : undefined;
    const hLeader = await h.locks.campaign(campaignName, opts({ ttl: 3_000 }));
    const xLeader = await x.locks.campaign(campaignName2, opts({ ttl: 3_000 }));
    const outcomes: Array<Promise<string>> = [];
    const settle = (p: Promise<unknown>, what: string) =>
      outcomes.push(p.then((l) => `${what}: GRANTED ${String(l)}`, (e: Error) => `${what}: ${e.name}`));
    for (const k of plain) settle(x.locks.acquire(k, opts({ ttl: 10_000, wait: 60_000 })), k);
    for (const m of multi) settle(x.locks.acquire(m, opts({ ttl: 3_000, wait: 60_000 })), m.join('+'));
    if (semaphores) for (let i = 0; i < N; i++) settle(x.locks.acquire(sem, opts({ ttl: 10_000, wait: 60_000, permits: 2 })), `sem#${i}`);
    for (let i = 0; i < 4; i++) settle(x.locks.campaign(campaignName, opts({ ttl: 3_000 })), `campaign#${i}`);
    // Every multi-key attempt of X holds its first key.
    const deadline = Date.now() + 20_000;
    for (const m of multi) {
      while ((await probe.locks.inspect(m[0], { backend })) === null) {
        if (Date.now() > deadline) throw new Error(`X never held ${m[0]}`);
        await sleep(20);
      }
    }
    await sleep(300);
    const t0 = Date.now();
    let closeError: unknown;
    const closing = x.close().catch((e: unknown) => (closeError = e));
    const closedIn = await Promise.race([closing.then(() => Date.now() - t0), after(CLOSE_WITHIN_MS * 4).then(() => -1)]);
    const results = await Promise.race([Promise.all(outcomes), after(5_000).then(() => ['outcomes not settled within 5 s of close()'])]);
    const findings: string[] = [];
    if (closedIn < 0 || closedIn > CLOSE_WITHIN_MS) findings.push(`close() took ${closedIn < 0 ? `more than ${CLOSE_WITHIN_MS * 4}` : closedIn} ms`);
    if (closeError) findings.push(`close() threw ${String(closeError)}`);
    findings.push(...results.filter((r) => r.includes('GRANTED') || r.includes('not settled')));
    void xSem;
    void xLeader;
    // X holds nothing now: its multi-key first keys, its permit, its leadership are free.
    await sleep(500);
    for (const m of multi) {
      for (const k of m.slice(0, 2)) {
        const info = await probe.locks.inspect(k, { backend });
        if (info) findings.push(`${k} still held after close() (remainingMs ${info.remainingMs}, waiters ${info.waiters})`);
      }
    }
    const leader2 = await probe.locks.inspect(campaignName2, { backend });
    if (leader2) findings.push(`X's leadership ${campaignName2} still held after close()`);
    if (semaphores) {
      const s = await probe.locks.inspect(sem, { backend });
      if (!s || (s.holders ?? 1) !== 1) findings.push(`semaphore after close(): ${JSON.stringify(s, (_k, v) => (typeof v === 'bigint' ? String(v) : v))} (expected H's one permit)`);
    }
    // H gives everything back: every key is free for the probe at once (no queue place of X first in line).
    for (const l of hHolds) await l.release();
    await hSem?.release();
    await hLeader.release();
    await sleep(300);
    const all = [...plain, ...multi.flat(), campaignName, campaignName2, ...(semaphores ? [sem] : [])];
    for (const k of all) {
      const got = await probe.locks.tryAcquire(k, opts({ ttl: 5_000, ...(k === sem ? { permits: 2 } : {}) }));
      if (!got) findings.push(`${k} not free for another app after H's release (inspect: ${JSON.stringify(await probe.locks.inspect(k, { backend }), (_k, v) => (typeof v === 'bigint' ? String(v) : v))})`);
      await got?.release();
    }
    expect(findings).toEqual([]);
  }, 120_000);
});
