import { InvalidLockOptionsError } from '../../lib/index.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2): a multi-key lease whose LATER key is a semaphore another app
// holds (permits 2, one permit free). The multi-key caller (a plain lock, permits 1) must not be
// admitted beside the semaphore's holder (two groups on one key), and the keys it took before are
// given back whatever it is told (InvalidLockOptionsError on permits, or busy).

const CASES = EVERY_BACKEND.filter((c) => c.semaphores);

describe.each(CASES)('multi-key over a semaphore key ($backend)', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let a: LockApp;
  let b: LockApp;
  beforeAll(async () => {
    running = await server();
    [a, b] = await Promise.all([startLockApp(running.options), startLockApp(running.options)]);
  }, 90_000);
  afterAll(async () => {
    for (const app of [a, b]) await app?.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  it.each([0, 2_000])('never admitted beside the semaphore holder, and leaves no key held (wait %d)', async (wait) => {
    const base = uniqueKey(`adv2-mksem-${backend}`);
    const keys = [`${base}:0`, `${base}:1`, `${base}:2`];
    const sem = await b.locks.acquire(keys[2], { purpose, backend, ttl: 20_000, permits: 2 });
    const outcome = await a.locks.acquire(keys, { purpose, backend, ttl: 5_000, wait }).then(
      (lease) => ({ lease }),
      (error: Error) => ({ error }),
    );
    const findings: string[] = [];
    if ('lease' in outcome) {
      if (!outcome.lease.signal.aborted && !sem.signal.aborted) findings.push(`multi-key lease granted beside the semaphore's holder of ${keys[2]}`);
      await outcome.lease.release();
    } else if (!(outcome.error instanceof InvalidLockOptionsError) && outcome.error.name !== 'LockBusyError') {
      findings.push(`refused with ${outcome.error.name}: ${outcome.error.message}`);
    }
    await sleep(200);
    for (const k of keys.slice(0, 2)) {
      const probe = await b.locks.tryAcquire(k, { purpose, backend, ttl: 2_000 });
      if (!probe) findings.push(`${k} left held after the refusal (${'error' in outcome ? outcome.error.name : 'lease'})`);
      await probe?.release();
    }
    await sem.release();
    expect(findings).toEqual([]);
  }, 30_000);
});
