import { MemoryBackend } from '../backends/memory/memory.backend.js';
import { DistributedLockService } from '../distributed-lock.service.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { LeaseLostError } from '../errors/lease-lost.error.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { resolveModuleOptions } from '../options/module-options.util.js';
import { TestingLockBackend } from '../testing/testing-lock-backend.js';
import { LockEngine } from './lock-engine.js';

// inspect() and forceRelease() through the service, on the in-process backend shared by several
// services (= application instances). Each real backend has its own spec against its server.

function serviceOn(backend: MemoryBackend): DistributedLockService {
  const options = resolveModuleOptions({ backends: { shared: backend }, purposes: { efficiency: 'shared', correctness: 'shared' } });
  const engine = new LockEngine(new Map([['shared', backend]]), { driftFactor: options.driftFactor, appBackends: ['shared'] });
  return new DistributedLockService(engine, options);
}

/** Poll `check` until it holds, bounded: wait for the state a step needs, never sleep and hope. */
async function until(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const invalid = async (call: Promise<unknown>): Promise<InvalidLockOptionsError> => {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidLockOptionsError);
  return error as InvalidLockOptionsError;
};

describe('inspect() and forceRelease()', () => {
  it('inspect: null when free; the hold as the backend keeps it (remaining time, waiters, token) when held', async () => {
    const backend = new MemoryBackend('shared');
    const [a, b, operator] = [serviceOn(backend), serviceOn(backend), serviceOn(backend)];
    expect(await operator.inspect('job', { purpose: 'correctness' })).toBeNull();
    const lease = await a.acquire('job', { purpose: 'correctness', ttl: 5_000 });
    const waiting = b.acquire('job', { purpose: 'correctness', ttl: 5_000, wait: 5_000 });
    // The waiter is queued before the look, and the key held a while (heldForMs below).
    await until(async () => ((await operator.inspect('job', { backend: 'shared' }))?.waiters ?? 0) >= 1, 5_000, 'the waiter queued');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const info = await operator.inspect('job', { backend: 'shared' });
    // The memory backend keeps the grant's time: how long it has been held, though held elsewhere.
    expect(info).toEqual({ key: 'job', backend: 'shared', remainingMs: expect.any(Number), waiters: 1, token: lease.token, heldForMs: expect.any(Number), mode: 'write' });
    expect(info!.heldForMs).toBeGreaterThanOrEqual(15);
    expect(info!.remainingMs).toBeGreaterThan(4_500);
    expect(info!.remainingMs).toBeLessThanOrEqual(5_000);
    await lease.release();
    const next = await waiting;
    expect((await operator.inspect('job', { purpose: 'efficiency' }))?.token).toBe(next.token);
    await next.release();
    expect(await operator.inspect('job', { purpose: 'correctness' })).toBeNull();
  });

  it("forceRelease: the holder's signal aborts ('force-released'), the waiter gets the key with a larger token, a second call finds it held by the waiter", async () => {
    const backend = new MemoryBackend('shared');
    const [a, b, operator] = [serviceOn(backend), serviceOn(backend), serviceOn(backend)];
    const stuck = await a.acquire('report', { purpose: 'correctness', ttl: 60_000 });
    const waiting = b.acquire('report', { purpose: 'correctness', ttl: 60_000, wait: 5_000 });
    // The waiter is queued (next in line) before the operator steps in.
    await until(async () => ((await operator.inspect('report', { backend: 'shared' }))?.waiters ?? 0) >= 1, 5_000, 'the waiter queued');
    expect(await operator.forceRelease('report', { purpose: 'correctness' })).toBe(true);
    expect(stuck.signal.aborted).toBe(true);
    expect(stuck.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((stuck.signal.reason as LeaseLostError).reason).toBe('force-released');
    expect(stuck.remainingMs()).toBe(0);
    const next = await waiting;
    expect(next.token! > stuck.token!).toBe(true);
    expect(next.signal.aborted).toBe(false);
    // The old holder's release touches nothing of the new holder's.
    await stuck.release();
    expect((await operator.inspect('report', { purpose: 'correctness' }))?.token).toBe(next.token);
    await next.release();
    expect(await operator.forceRelease('report', { purpose: 'correctness' })).toBe(false);
  });

  it('a holder in the same process is told at once, and its using() body sees the loss', async () => {
    const locks = serviceOn(new MemoryBackend('shared'));
    let signal: AbortSignal | undefined;
    const running = locks.using('batch', { purpose: 'efficiency', ttl: 10_000, rejectOnLoss: true }, async (lease) => {
      signal = lease.signal;
      // Work that stops when its signal says the lock is gone (a 5 s timer left running kept the
      // jest worker alive after the file: "a worker process has failed to exit gracefully").
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5_000);
        lease.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
      });
    });
    // The body runs (holds the key) before the operator steps in.
    await until(() => signal !== undefined, 5_000, 'the body running');
    expect(await locks.forceRelease('batch', { purpose: 'efficiency' })).toBe(true);
    await expect(running).rejects.toMatchObject({ name: 'LeaseLostError', reason: 'force-released' });
    expect(signal!.aborted).toBe(true);
    expect(await locks.inspect('batch', { purpose: 'efficiency' })).toBeNull();
  });

  it('refuses a bad key or target naming the field, and reports an unreachable backend', async () => {
    const backend = new TestingLockBackend('shared');
    const locks = serviceOn(backend);
    expect((await invalid(locks.inspect('', { purpose: 'efficiency' }))).field).toBe('key');
    expect((await invalid(locks.forceRelease('k\uD800', { purpose: 'efficiency' }))).field).toBe('key');
    expect((await invalid(locks.inspect('k', {} as never))).field).toBe('purpose');
    expect((await invalid(locks.inspect('k', null as never))).field).toBe('options');
    expect((await invalid(locks.inspect('k', { backend: 'redis' }))).field).toBe('backend');
    // Names every object inherits are not backends.
    for (const name of ['toString', 'constructor', '__proto__', 'hasOwnProperty']) {
      expect((await invalid(locks.inspect('k', { backend: name }))).field).toBe('backend');
      expect((await invalid(locks.forceRelease('k', { purpose: 'efficiency', backend: name }))).field).toBe('backend');
      expect((await invalid(locks.tryAcquire('k', { purpose: 'efficiency', backend: name }))).field).toBe('backend');
    }
    expect((await invalid(locks.forceRelease('k', { purpose: 'speed' as never }))).field).toBe('purpose');
    expect((await invalid(locks.forceRelease('k', { purpose: 'efficiency', ttl: 5 } as never))).field).toBe('ttl');
    backend.makeUnavailable();
    await expect(locks.inspect('k', { purpose: 'efficiency' })).rejects.toBeInstanceOf(LockBackendUnavailableError);
    await expect(locks.forceRelease('k', { purpose: 'efficiency' })).rejects.toBeInstanceOf(LockBackendUnavailableError);
  });
});
