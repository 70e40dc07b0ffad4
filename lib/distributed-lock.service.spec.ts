import { MemoryBackend } from './backends/memory/memory.backend.js';
import { DistributedLockService } from './distributed-lock.service.js';
import { LockEngine } from './engine/lock-engine.js';
import { DistributedLockError } from './errors/distributed-lock.error.js';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error.js';
import { LeaseLostError } from './errors/lease-lost.error.js';
import { LockBackendUnavailableError } from './errors/lock-backend-unavailable.error.js';
import type { AcquireRequest, AcquireResult, LockBackend } from './backends/lock-backend.interface.js';
import { resolveModuleOptions } from './options/module-options.util.js';
import { TestingLockBackend } from './testing/testing-lock-backend.js';
import { LEASE_INTERNALS } from './engine/lease.js';

// Engine logic against the in-process backend (shared by two services = two "instances"). The
// backends themselves are tested on real servers; here a thin wrapper plays a slow network.

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll `check` until it holds, bounded: wait for the state a step needs, never sleep and hope. */
async function until(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(5);
  }
}

type ServiceWithEngine = DistributedLockService & { lockEngine: LockEngine };

function serviceOn(backend: LockBackend): ServiceWithEngine {
  const options = resolveModuleOptions({ backends: { shared: backend }, purposes: { efficiency: 'shared', correctness: 'shared' } });
  const engine = new LockEngine(new Map([['shared', backend]]), { driftFactor: options.driftFactor, appBackends: Object.keys(options.backends) });
  return Object.assign(new DistributedLockService(engine, options), { lockEngine: engine });
}

/** Every owner id held in the engine's books (internal state: nothing may pile up). */
const heldCount = (service: ServiceWithEngine): number => service.lockEngine['registry'].all().length;

/**
 * A backend whose first acquire answer arrives after the ttl, and whose release of that attempt
 * "times out" but is applied later — what a slow etcd or Redis does with a delayed clean-up.
 */
class LateFirstAnswer extends MemoryBackend {
  attempts: string[] = [];
  delayedDeleteLanded = false;
  private late = true;
  constructor(private readonly lateByMs: number) {
    super('late');
  }
  override async acquire(request: AcquireRequest): Promise<AcquireResult> {
    this.attempts.push(request.owner);
    const result = await super.acquire(request);
    if (this.late) {
      this.late = false;
      await sleep(this.lateByMs);
    }
    return result;
  }
  override async release(key: string, owner: string): Promise<boolean> {
    if (owner === this.attempts[0] && this.attempts.length === 1) {
      // The release's answer is lost; the delete itself lands 300 ms later (a clean-up retry).
      setTimeout(() => void super.release(key, owner).then(() => (this.delayedDeleteLanded = true)), 300);
      throw new LockBackendUnavailableError('late', 'release', 'no answer within 10 ms');
    }
    return super.release(key, owner);
  }
}

describe('DistributedLockService engine under composition (in-process backend)', () => {
  it('a retry after an answer that came too late uses a new owner id: a delayed clean-up never frees the retry\'s key', async () => {
    const backend = new LateFirstAnswer(1_050);
    const a = serviceOn(backend);
    const b = serviceOn(backend);
    const lease = await a.acquire('late-key', { purpose: 'efficiency', ttl: 1_000, wait: 5_000 });
    expect(backend.attempts.length).toBeGreaterThanOrEqual(2);
    expect(new Set(backend.attempts).size).toBe(backend.attempts.length);
    await until(() => backend.delayedDeleteLanded, 5_000, "the first attempt's delayed delete");
    const intruder = await b.tryAcquire('late-key', { purpose: 'efficiency', ttl: 1_000 });
    // Never two unaborted leases with time left on one key.
    expect(intruder === null || lease.signal.aborted).toBe(true);
    expect(intruder).toBeNull();
    await lease.release();
  });

  it('a backend that always answers after the ttl is retried with a backoff, not in a tight loop', async () => {
    class AlwaysLate extends MemoryBackend {
      calls = 0;
      override async acquire(request: AcquireRequest): Promise<AcquireResult> {
        this.calls += 1;
        const result = await super.acquire(request);
        await sleep(25);
        return result;
      }
    }
    const backend = new AlwaysLate('slow');
    const service = serviceOn(backend);
    const error = await service.acquire('slow-key', { purpose: 'efficiency', ttl: 20, wait: 1_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockBackendUnavailableError);
    // Without a backoff: one attempt per 25 ms answer, ~40 in the second.
    expect(backend.calls).toBeLessThanOrEqual(12);
    expect(heldCount(service)).toBe(0);
  });

  it('a reentrant handle taken by a detached task keeps the key until it is released, then it is free', async () => {
    const backend = new MemoryBackend('m');
    const a = serviceOn(backend);
    const b = serviceOn(backend);
    let detached: Promise<import('./engine/lease.js').Lease> | undefined;
    await a.using('re-key', { purpose: 'efficiency', ttl: 10_000 }, async () => {
      detached = (async () => {
        await sleep(5);
        return a.acquire('re-key', { purpose: 'efficiency', wait: 0 });
      })();
      expect((await detached).reentrant).toBe(true);
    });
    const inner = await detached!;
    // The outer call is over, but the task it started still works under the lock: never two holders.
    expect(await b.tryAcquire('re-key', { purpose: 'efficiency' })).toBeNull();
    expect(inner.signal.aborted).toBe(false);
    expect(inner.remainingMs()).toBeGreaterThan(0);
    await inner.release();
    // The key is free on the backend before another instance asks.
    await until(async () => (await backend.inspect('re-key')) === null, 5_000, 'the key freed');
    const next = await b.tryAcquire('re-key', { purpose: 'efficiency' });
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('an open reentrant handle aborts when the lease is lost', async () => {
    const backend = new MemoryBackend('m');
    const service = serviceOn(backend);
    let inner!: import('./engine/lease.js').Lease;
    const outer = await service.acquire('re-lost', { purpose: 'efficiency', ttl: 10_000 });
    await service.lockEngine.context.run(outer, async () => {
      inner = await service.acquire('re-lost', { purpose: 'efficiency', wait: 0 });
      await backend.release('re-lost', LEASE_INTERNALS.core(outer).owner); // someone deleted the key
      await expect(outer.extend()).rejects.toBeInstanceOf(LeaseLostError);
    });
    await outer.release().catch(() => undefined);
    expect(inner.signal.aborted).toBe(true);
    expect(inner.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(inner.remainingMs()).toBe(0);
    await expect(inner.extend()).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('a re-acquisition right after this process released the key does not find its own release in flight busy', async () => {
    class SlowRelease extends MemoryBackend {
      override async release(key: string, owner: string): Promise<boolean> {
        await sleep(30);
        return super.release(key, owner);
      }
    }
    const service = serviceOn(new SlowRelease('m'));
    const first = await service.acquire('again', { purpose: 'efficiency' });
    void first.release(); // not awaited: a finalize(), a loop
    const second = await service.acquire('again', { purpose: 'efficiency', wait: 0 });
    expect(second.reentrant).toBe(false);
    await second.release();
  });

  it('an inner acquisition stops waiting as soon as the lease it is nested in is lost, and its work never starts', async () => {
    const backend = new MemoryBackend('m');
    const a = serviceOn(backend);
    const b = serviceOn(backend);
    const other = await b.acquire('inner-key', { purpose: 'efficiency', ttl: 10_000 });
    let innerRan = false;
    const started = performance.now();
    const outcome = await a
      .using('outer-key', { purpose: 'efficiency', ttl: 200 }, () =>
        a.using('inner-key', { purpose: 'efficiency', wait: 3_000 }, () => {
          innerRan = true;
        }),
      )
      .catch((e: unknown) => e);
    expect(outcome).toBeInstanceOf(LeaseLostError);
    expect(innerRan).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_500);
    await other.release();
  });

  it('a reentrant handle released early does not abort the outer lease', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    await service.using('re-early', { purpose: 'efficiency', ttl: 10_000 }, async (outer) => {
      const inner = await service.acquire('re-early', { purpose: 'efficiency', wait: 0 });
      await inner.release();
      expect(outer.signal.aborted).toBe(false);
      expect(outer.remainingMs()).toBeGreaterThan(0);
    });
  });

  it('extend(ttlMs) applies the same bounds as the ttl, with InvalidLockOptionsError', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    const lease = await service.acquire('extend-bounds', { purpose: 'efficiency', ttl: 5_000 });
    for (const bad of [3e9, 1.5, 0, -1, 5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const error = await lease.extend(bad).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect(error).toBeInstanceOf(DistributedLockError);
      expect((error as InvalidLockOptionsError).field).toBe('ttlMs');
    }
    // Still held, still bounded by the original ttl: a refused extend changes nothing.
    expect(lease.signal.aborted).toBe(false);
    expect(lease.remainingMs()).toBeLessThanOrEqual(5_000);
    await lease.extend(2_000);
    expect(lease.remainingMs()).toBeLessThanOrEqual(2_000);
    await lease.release();
  });

  it('a throwing event listener is logged and never changes the lock\'s outcome', async () => {
    const backend = new MemoryBackend('m');
    const service = serviceOn(backend);
    const boom = (): never => {
      throw new Error('listener bug');
    };
    for (const name of ['acquired', 'released', 'busy', 'lost'] as const) service.events.on(name, boom);
    let after = 0;
    service.events.on('acquired', () => (after += 1));
    const lease = await service.acquire('listener-key', { purpose: 'efficiency', ttl: 5_000 });
    expect(lease.signal.aborted).toBe(false);
    expect(after).toBe(1); // the listener after the throwing one still ran
    await expect(service.tryAcquire('listener-key', { purpose: 'efficiency' })).resolves.toBeNull();
    await expect(lease.release()).resolves.toBeUndefined();
    expect(await backend.release('listener-key', 'nobody')).toBe(false);
    const again = await service.tryAcquire('listener-key', { purpose: 'efficiency' });
    expect(again).not.toBeNull();
    await again!.release();
  });

  it('a not-owner loss leaves nothing in the engine\'s books even if the caller never releases', async () => {
    const backend = new MemoryBackend('m');
    const service = serviceOn(backend);
    const lease = await service.acquire('not-owner-key', { purpose: 'efficiency', ttl: 5_000 });
    await backend.release('not-owner-key', LEASE_INTERNALS.core(lease).owner); // someone deleted the key
    await expect(lease.extend()).rejects.toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(true);
    expect(heldCount(service)).toBe(0);
  });

  it('shutdown rejects waiting calls and never starts a waiter\'s work after it began', async () => {
    const backend = new MemoryBackend('m');
    const service = serviceOn(backend);
    const holder = await service.acquire('shutdown-key', { purpose: 'efficiency', ttl: 10_000 });
    let ranAfterShutdown = false;
    let shutdownBegan = false;
    const waiter = service.using('shutdown-key', { purpose: 'efficiency', wait: 5_000 }, () => {
      if (shutdownBegan) ranAfterShutdown = true;
    });
    const waited = waiter.then(
      () => 'ran',
      (e: unknown) => e,
    );
    // The waiter is queued behind the holder before shutdown begins.
    await until(async () => ((await service.inspect('shutdown-key', { purpose: 'efficiency' }))?.waiters ?? 0) >= 1, 5_000, 'the waiter queued');
    shutdownBegan = true;
    await service.lockEngine.beforeApplicationShutdown();
    const outcome = await waited;
    expect(ranAfterShutdown).toBe(false);
    expect(outcome).toBeInstanceOf(LockBackendUnavailableError);
    expect(holder.signal.aborted).toBe(true);
    expect(heldCount(service)).toBe(0);
  });

  it('shutdown keeps a running lease\'s key until its lockAtLeastFor, so a restarted replica does not rerun the tick', async () => {
    const backend = new MemoryBackend('m');
    const a = serviceOn(backend);
    const b = serviceOn(backend);
    let release!: () => void;
    const running = a.using('tick', { purpose: 'efficiency', ttl: 10_000, lockAtLeastFor: 3_000 }, () => new Promise<void>((r) => (release = r)));
    // The tick is running (holds the key) before shutdown begins.
    await until(() => release !== undefined, 5_000, 'the tick running');
    await a.lockEngine.beforeApplicationShutdown();
    release();
    await running.catch(() => undefined);
    expect(await b.tryAcquire('tick', { purpose: 'efficiency' })).toBeNull();
  });

  it('remainingMs() never exceeds what the backend itself can vouch for (a shared session)', async () => {
    class ShortSession extends MemoryBackend {
      until = performance.now() + 300;
      validUntil(): number {
        return this.until;
      }
    }
    const service = serviceOn(new ShortSession('s'));
    const lease = await service.acquire('session-key', { purpose: 'correctness', ttl: 30_000 });
    expect(lease.remainingMs()).toBeLessThanOrEqual(300);
    await lease.release();
  });

  it('an extend() answered after a lockAtLeastFor release does not delete the key early', async () => {
    class SlowExtend extends MemoryBackend {
      slow = true;
      override async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
        const answer = await super.extend(key, owner, ttlMs);
        if (this.slow) {
          this.slow = false;
          await sleep(100);
        }
        return answer;
      }
    }
    const backend = new SlowExtend('m');
    const a = serviceOn(backend);
    const b = serviceOn(backend);
    const lease = await a.acquire('inflight-extend', { purpose: 'efficiency', ttl: 5_000, lockAtLeastFor: 2_000 });
    const extending = lease.extend().catch((e: unknown) => e);
    await lease.release(); // keeps the key for lockAtLeastFor
    expect(await extending).toBeInstanceOf(LeaseLostError);
    await sleep(50);
    expect(await b.tryAcquire('inflight-extend', { purpose: 'efficiency' })).toBeNull();
  });

  it('an async listener that rejects is isolated too (no unhandled rejection)', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      service.events.on('acquired', async () => {
        throw new Error('async listener bug');
      });
      const ran = await service.using('async-listener', { purpose: 'efficiency' }, () => 'ran');
      expect(ran).toBe('ran');
      await sleep(20);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('reentrant handles that are never released do not pile up on the lease', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    await service.using('many-handles', { purpose: 'efficiency', ttl: 10_000 }, async (outer) => {
      for (let i = 0; i < 1_000; i++) await service.tryAcquire('many-handles', { purpose: 'efficiency' });
      const core = LEASE_INTERNALS.core(outer) as unknown as Record<string, unknown>;
      const sizes = Object.values(core).filter((v): v is Set<unknown> => v instanceof Set).map((set) => set.size);
      expect(Math.max(0, ...sizes)).toBeLessThanOrEqual(1);
    });
  });

  it('fn never starts once shutdown began, even if it began between the grant and the call', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    service.events.on('acquired', () => queueMicrotask(() => void service.lockEngine.beforeApplicationShutdown()));
    let ran = false;
    const outcome = await service
      .using('shutdown-gap', { purpose: 'efficiency' }, () => {
        ran = true;
      })
      .catch((e: unknown) => e);
    expect(ran).toBe(false);
    expect(outcome).toBeInstanceOf(DistributedLockError);
  });

  it('a reentrant acquire with an already-aborted signal rejects like any other', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    await service.using('re-aborted', { purpose: 'efficiency' }, async () => {
      const controller = new AbortController();
      controller.abort(new Error('caller gave up'));
      await expect(service.acquire('re-aborted', { purpose: 'efficiency', signal: controller.signal })).rejects.toThrow('caller gave up');
    });
  });

  it('a closed application leaves no loss listener on a backend it was given', async () => {
    const backend = new TestingLockBackend('t');
    const count = (): number => (backend as unknown as { lossListeners: { listeners: unknown[] } }).lossListeners.listeners.length;
    for (let i = 0; i < 20; i++) {
      const service = serviceOn(backend);
      await service.lockEngine.onApplicationShutdown();
    }
    expect(count()).toBe(0);
  });

  it('an extend() whose answer is lost may still have shortened the key: the holder trusts the shorter of both', async () => {
    class LostExtendAnswer extends MemoryBackend {
      override async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
        await super.extend(key, owner, ttlMs); // applied on the server...
        throw new LockBackendUnavailableError('m', 'extend', 'no answer within 10 ms'); // ...answer lost
      }
    }
    const service = serviceOn(new LostExtendAnswer('m'));
    const lease = await service.acquire('lost-extend', { purpose: 'efficiency', ttl: 10_000 });
    await expect(lease.extend(200)).rejects.toBeInstanceOf(LockBackendUnavailableError);
    expect(lease.remainingMs()).toBeLessThanOrEqual(200);
    await expect(lease.extend(20_000)).rejects.toBeInstanceOf(LockBackendUnavailableError);
    expect(lease.remainingMs()).toBeLessThanOrEqual(200); // a longer one that may not have landed changes nothing
  });

  it('re-entering a key for another purpose (one backend serving both) is refused, not silently inherited', async () => {
    const service = serviceOn(new MemoryBackend('m'));
    await service.using('mixed', { purpose: 'efficiency' }, async () => {
      const error = await service.acquire('mixed', { purpose: 'correctness', wait: 0 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as InvalidLockOptionsError).field).toBe('purpose');
      const same = await service.acquire('mixed', { purpose: 'efficiency', wait: 0 });
      expect(same.reentrant).toBe(true);
    });
  });
});
