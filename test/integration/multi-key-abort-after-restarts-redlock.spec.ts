import type { AcquireRequest, LockBackend } from '../../lib/backends/lock-backend.interface.js';
import { freshRedlock, type BackendServer } from '../harness/backend-servers.js';
import { backendsOf } from '../harness/backends-of.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review, round 3: a multi-key caller that gives up (its signal) while an attempt of
// it is in flight leaves a key held. The engine gives back at once (take(): `if (queued) await
// giveBack()`), i.e. MultiKeyBackend.release() runs BESIDE the attempt still running; release()
// deletes the owner's generation counter, so the rest of that attempt computes owner ids of
// generation 0 (idOf), not of the generation it started in. After two restarts (here: k1 force-
// released twice by another process while the caller waited for k2; Redlock sends no notice, so
// the refresh finds it and MultiKeyBackend.restart() bumps the generation), the key the attempt
// was taking (k2, as `<owner>.2-1`) is then given back by nobody: release() ran before its grant,
// the attempt's own restart releases `<owner>.0-*`, the engine's after-abort release `<owner>.1-*`.
// README: "a caller that gives up (busy, its wait over, its signal, a lost key on the way) leaves
// none of them held". The timing is placed by wrapping the backend's acquire (the caller's signal
// aborts as k2's request of generation 2 goes out); the servers and the library are real.

const generationOf = (owner: string): number => Number(owner.slice(owner.lastIndexOf('.') + 1, owner.lastIndexOf('-')));

describe('multi-key caller aborted mid-attempt after restarts (Redlock)', () => {
  let srv: BackendServer;
  let a: LockApp;
  let b: LockApp;
  const opts = { purpose: 'efficiency' as const, backend: 'redlock' };
  beforeAll(async () => {
    srv = await freshRedlock();
    [a, b] = await Promise.all([startLockApp(srv.options), startLockApp(srv.options)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, b]) await app?.close().catch(() => undefined);
    await srv?.stop();
  });

  // restarts 0: the control (holds); restarts 2: the defect.
  it.each([0, 2])('no key is left held once the aborted acquisition has settled (%i restarts before)', async (restarts) => {
    const [k1, k2, k3] = ['1', '2', '3'].map((n) => uniqueKey(`r3-mk-gen-${n}`));
    const blocker = await b.locks.acquire(k2, { ...opts, ttl: 30_000 });
    const inner = backendsOf(a.app).get('redlock') as LockBackend;
    const originalAcquire = inner.acquire.bind(inner);
    const k1Generations: number[] = [];
    const ac = new AbortController();
    let abortAtGeneration: number | undefined;
    inner.acquire = async (request: AcquireRequest) => {
      if (request.key === k2 && abortAtGeneration !== undefined && generationOf(request.owner) === abortAtGeneration) ac.abort(new Error('the caller gave up'));
      const result = await originalAcquire(request);
      if (request.key === k1 && result.acquired) k1Generations.push(generationOf(request.owner));
      return result;
    };
    try {
      const acquiring = a.locks.acquire([k1, k2, k3], { ...opts, ttl: 3_000, wait: 25_000, signal: ac.signal }).catch((error: unknown) => error);
      const until = async (g: number): Promise<void> => {
        const deadline = Date.now() + 8_000;
        while (!k1Generations.includes(g) && Date.now() < deadline) await sleep(10);
        expect(k1Generations).toContain(g);
      };
      await until(0);
      for (let g = 1; g <= restarts; g++) {
        expect(await b.locks.forceRelease(k1, { backend: 'redlock' })).toBe(true);
        await until(g);
      }
      abortAtGeneration = restarts;
      await blocker.release();
      const outcome = await acquiring;
      expect(outcome).toBeInstanceOf(Error);
      await sleep(500); // every give-back has settled
      const held = { k1: await b.locks.inspect(k1, opts), k2: await b.locks.inspect(k2, opts), k3: await b.locks.inspect(k3, opts) };
      expect(held).toEqual({ k1: null, k2: null, k3: null });
    } finally {
      inner.acquire = originalAcquire;
    }
  }, 40_000);
});
