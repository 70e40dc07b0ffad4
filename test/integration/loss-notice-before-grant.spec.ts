import { MemoryBackend, type LockBackend } from '../../lib/index.js';
import type { AcquireRequest, AcquireResult } from '../../lib/backends/lock-backend.interface.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Round 3, defect 1 at its root: a backend's loss notice can overtake the answer of the acquisition
// it concerns (the notice and the answer travel on different connections: Redis pub/sub, a
// PostgreSQL LISTEN session, an etcd watch). The engine used to look for a lease of that owner,
// find none yet, and drop the notice; the grant then came back valid over a key the backend had
// already ended. A real in-process backend (MemoryBackend, one store for both apps) whose answers
// to one app are held back shows it.

/** `inner`, with the answer to a grant held back for `holdMs` when `holding` is on. */
function slowAnswers(inner: MemoryBackend, holdMs: number): LockBackend & { holding: boolean; granted?: string } {
  const backend: LockBackend & { holding: boolean; granted?: string } = {
    name: inner.name,
    capabilities: { ...inner.capabilities, semaphore: false },
    holding: false,
    async acquire(request: AcquireRequest): Promise<AcquireResult> {
      const result = await inner.acquire(request);
      if (result.acquired && backend.holding) {
        backend.granted = request.key;
        await sleep(holdMs);
      }
      return result;
    },
    waitForTurn: (key, owner, timeoutMs, signal) => inner.waitForTurn(key, owner, timeoutMs, signal),
    extend: (key, owner, ttlMs) => inner.extend(key, owner, ttlMs),
    release: (key, owner) => inner.release(key, owner),
    inspect: (key) => inner.inspect(key),
    forceRelease: (key) => inner.forceRelease(key),
    onLeaseLost: (listener) => inner.onLeaseLost(listener),
    close: async () => undefined,
  };
  return backend;
}

describe('a loss notice that overtakes the grant it concerns', () => {
  const store = new MemoryBackend();
  const slow = slowAnswers(store, 150);
  let a: LockApp;
  let c: LockApp;
  beforeAll(async () => {
    [a, c] = await Promise.all([
      startLockApp({ backends: { shared: slow }, purposes: { efficiency: 'shared', correctness: 'shared' } }),
      startLockApp({ backends: { shared: store }, purposes: { efficiency: 'shared', correctness: 'shared' } }),
    ]);
  });
  afterAll(async () => {
    await a?.close();
    await c?.close();
  });

  for (const keys of [1, 3]) {
    it(`${keys === 1 ? 'one key' : 'three keys'}: the lease returned is held on the server — never a lease over a key force-released before its answer came`, async () => {
      const names = Array.from({ length: keys }, (_, i) => uniqueKey(`r3-notice-${keys}-${i}`));
      const target = keys === 1 ? names[0] : names;
      slow.holding = true;
      slow.granted = undefined;
      const acquiring = a.locks.acquire(target, { purpose: 'correctness', backend: 'shared', ttl: 10_000, wait: 5_000 });
      // The grant is made on the server; its answer is on its way (held back): force-release it now.
      const deadline = Date.now() + 2_000;
      while (slow.granted === undefined && Date.now() < deadline) await sleep(2);
      slow.holding = false;
      expect(await c.locks.forceRelease(slow.granted!, { backend: 'shared' })).toBe(true);
      const lease = await acquiring;
      try {
        expect(lease.signal.aborted).toBe(false);
        // Trusted, so every key must really be its own: nobody else can take any of them.
        const takenByAnother: boolean[] = [];
        for (const name of names) {
          const other = await c.locks.tryAcquire(name, { purpose: 'correctness', backend: 'shared' });
          takenByAnother.push(other !== null);
          await other?.release();
        }
        expect(takenByAnother).toEqual(names.map(() => false));
      } finally {
        await lease.release();
      }
    });
  }
});
