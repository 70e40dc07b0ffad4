import { InvalidLockOptionsError, type Lease } from '../../lib/index.js';
import type { AcquireRequest } from '../../lib/backends/lock-backend.interface.js';
import { backendsOf } from '../harness/backends-of.js';
import { freshPostgres, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Round 3, defect 5 (minor, adversarial report): bad input must fail closed — at once, naming the
// field, before any backend call — and one distinct key is one key however often it is named.

/** What an outcome looks like in an assertion: the error's class and field, or 'resolved'. */
const describeOutcome = (outcome: { error?: unknown; value?: unknown }): string => {
  if (!('error' in outcome)) return 'resolved';
  const e = outcome.error as { constructor?: { name?: string }; field?: string; message?: string };
  // A message naming 1,001 keys is cut in the middle: its start and end say what it is.
  const message = String(e?.message);
  const shown = message.length > 300 ? `${message.slice(0, 120)} … ${message.slice(-80)}` : message;
  return `${e?.constructor?.name}${e?.field !== undefined ? ` (field ${e.field})` : ''}: ${shown}`;
};
const settle = <T>(p: Promise<T>): Promise<{ value?: T; error?: unknown }> => p.then((value) => ({ value }), (error: unknown) => ({ error }));

/** Every acquire request the app's backend `name` receives (and acquireAll's keys), until `stop()`. */
function recordAcquires(app: LockApp, name: string): { keys: string[]; stop(): void } {
  const backend = backendsOf(app.app).get(name)!;
  const keys: string[] = [];
  const original = { acquire: backend.acquire, acquireAll: backend.acquireAll };
  backend.acquire = (request: AcquireRequest) => (keys.push(request.key), original.acquire.call(backend, request));
  if (original.acquireAll) backend.acquireAll = (ks, owners, ttl) => (keys.push(...ks), original.acquireAll!.call(backend, ks, owners, ttl));
  return {
    keys,
    stop: () => {
      backend.acquire = original.acquire;
      if (original.acquireAll) backend.acquireAll = original.acquireAll;
    },
  };
}

describe('a NUL in a later key of a multi-key call on PostgreSQL', () => {
  let running: BackendServer;
  let a: LockApp;
  let c: LockApp;
  beforeAll(async () => {
    running = await freshPostgres();
    [a, c] = await Promise.all([startLockApp(running.options), startLockApp(running.options)]);
  }, 60_000);
  afterAll(async () => {
    for (const app of [a, c]) await app?.close();
    await running?.stop();
  });

  it('rejects at once with InvalidLockOptionsError (field key), and no backend call takes the first key', async () => {
    const base = uniqueKey('r3-nul');
    // Sorted, the key with the NUL comes second: the first key is taken first, key by key.
    const keys = [`${base}:0`, `${base}:1\u0000x`];
    const recorded = recordAcquires(a, 'postgres');
    let firstKeySeenHeld = false;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        if (await c.locks.inspect(keys[0], { backend: 'postgres' })) firstKeySeenHeld = true;
        await sleep(5);
      }
    })();
    const outcome = await settle(a.locks.acquire(keys, { purpose: 'correctness', backend: 'postgres', ttl: 10_000, wait: 2_000 }));
    await sleep(50);
    watching = false;
    await watcher;
    recorded.stop();
    const after = await c.locks.inspect(keys[0], { backend: 'postgres' });
    if (outcome.value) await (outcome.value as Lease).release().catch(() => undefined);
    expect({
      outcome: describeOutcome(outcome),
      invalidKey: outcome.error instanceof InvalidLockOptionsError && outcome.error.field === 'key',
      backendCalls: recorded.keys,
      firstKeySeenHeld,
      firstKeyHeldAfter: after !== null,
    }).toEqual({
      outcome: expect.stringMatching(/^InvalidLockOptionsError \(field key\)/),
      invalidKey: true,
      backendCalls: [],
      firstKeySeenHeld: false,
      firstKeyHeldAfter: false,
    });
  }, 30_000);
});

describe('options checked before any backend call (memory backend)', () => {
  let app: LockApp;
  beforeAll(async () => {
    app = await startLockApp({ memory: {} });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('(5b) using() with no function rejects with InvalidLockOptionsError (field fn) without taking the lock', async () => {
    const key = uniqueKey('r3-using-no-fn');
    const acquired: string[] = [];
    const onAcquired = (e: { key: string }): void => void acquired.push(e.key);
    app.locks.events.on('acquired', onAcquired);
    const recorded = recordAcquires(app, 'memory');
    try {
      const outcome = await settle(app.locks.using(key, { purpose: 'efficiency', ttl: 10_000 }, undefined as any));
      const after = await app.locks.inspect(key, { purpose: 'efficiency' });
      expect({
        outcome: describeOutcome(outcome),
        invalidFn: outcome.error instanceof InvalidLockOptionsError && outcome.error.field === 'fn',
        backendCalls: recorded.keys,
        acquiredEvents: acquired,
        heldAfter: after !== null,
      }).toEqual({
        outcome: expect.stringMatching(/^InvalidLockOptionsError \(field fn\)/),
        invalidFn: true,
        backendCalls: [],
        acquiredEvents: [],
        heldAfter: false,
      });
    } finally {
      recorded.stop();
      app.locks.events.off('acquired', onAcquired);
    }
  });

  it("(5c) tryAcquire() refuses a 'wait' (InvalidLockOptionsError naming wait) before any backend call; wait: 0 or none stays accepted", async () => {
    const key = uniqueKey('r3-try-wait');
    const recorded = recordAcquires(app, 'memory');
    const refused = await settle(app.locks.tryAcquire(key, { purpose: 'efficiency', wait: 5_000 } as any)).finally(() => recorded.stop());
    if (refused.value) await refused.value.release();
    expect({
      outcome: describeOutcome(refused),
      invalidWait: refused.error instanceof InvalidLockOptionsError && refused.error.field === 'wait',
      backendCalls: recorded.keys,
    }).toEqual({ outcome: expect.stringMatching(/^InvalidLockOptionsError \(field wait\)/), invalidWait: true, backendCalls: [] });
    const zero = await app.locks.tryAcquire(key, { purpose: 'efficiency', wait: 0 } as any);
    expect(zero).not.toBeNull();
    await zero!.release();
    const none = await app.locks.tryAcquire(key, { purpose: 'efficiency' });
    expect(none).not.toBeNull();
    await none!.release();
  });

  it('(5d) 1,001 copies of one key are one key (accepted); 1,000 distinct keys named 1,001 times are accepted; 1,001 distinct keys are refused', async () => {
    const one = uniqueKey('r3-one-key');
    const copies = await settle(app.locks.acquire(Array.from({ length: 1_001 }, () => one), { purpose: 'efficiency', ttl: 10_000, wait: 0 }));
    if (copies.value) await copies.value.release();
    const base = uniqueKey('r3-thousand');
    const thousand = Array.from({ length: 1_000 }, (_, i) => `${base}:${String(i).padStart(4, '0')}`);
    const repeated = await settle(app.locks.acquire([...thousand, thousand[0]], { purpose: 'efficiency', ttl: 10_000, wait: 0 }));
    if (repeated.value) await repeated.value.release();
    const distinct = await settle(app.locks.acquire([...thousand, `${base}:extra`], { purpose: 'efficiency', ttl: 10_000, wait: 0 }));
    if (distinct.value) await distinct.value.release();
    expect({
      copiesOfOne: describeOutcome(copies),
      copiesKeys: copies.value?.keys,
      thousandDistinctNamed1001Times: describeOutcome(repeated),
      thousandDistinctKeys: repeated.value?.keys.length,
      distinct1001: describeOutcome(distinct),
    }).toEqual({
      copiesOfOne: 'resolved',
      copiesKeys: [one],
      thousandDistinctNamed1001Times: 'resolved',
      thousandDistinctKeys: 1_000,
      distinct1001: expect.stringMatching(/^InvalidLockOptionsError \(field key\).*at most 1,?000/),
    });
  }, 30_000);
});
