import { MemoryBackend, type AcquireRequest, type AcquireResult, type HeldLock, type UpgradeResult } from 'nest-distributed-lock';
import { verifyLockBackend, type BackendConformanceReport } from 'nest-distributed-lock/testing';

// The conformance suite must tell a broken backend from a sound one. Each mutant below breaks one
// promise of the LockBackend contract; the report must name that promise's check (and the sound
// MemoryBackend must pass every check it claims). The built-in backends against their real
// servers: test/conformance/built-in-backends.spec.ts.

const quick = { ttlMs: 5_000, wakeWithinMs: 1_000, checkTimeoutMs: 10_000 };
const failedNames = (report: BackendConformanceReport): string[] => report.failed.map((f) => f.check);

/** Tokens that never grow: every grant says 1. */
class ConstantTokens extends MemoryBackend {
  override async acquire(request: AcquireRequest): Promise<AcquireResult> {
    const result = await super.acquire(request);
    return result.acquired ? { acquired: true, token: 1n } : result;
  }
}

/** release() answers true and does nothing. */
class ReleaseDoesNothing extends MemoryBackend {
  override async release(): Promise<boolean> {
    return true;
  }
}

/** extend() for anyone: a stranger's extend answers true. */
class ExtendsForAnyone extends MemoryBackend {
  override async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    await super.extend(key, owner, ttlMs);
    return true;
  }
}

/** release() deletes whoever holds the key (no owner check). */
class ReleaseDeletesAnyHolder extends MemoryBackend {
  override async release(key: string): Promise<boolean> {
    return (await this.forceRelease(key)) !== undefined;
  }
}

/** inspect() that leaves out the holder's token (as etcd did for another process's hold). */
class InspectWithoutToken extends MemoryBackend {
  override async inspect(key: string): Promise<HeldLock | null> {
    const held = await super.inspect(key);
    return held ? { ...held, token: undefined } : null;
  }
}

/** A busy single try that stays queued (a trace left behind). */
class TryStaysQueued extends MemoryBackend {
  override async acquire(request: AcquireRequest): Promise<AcquireResult> {
    return super.acquire({ ...request, queue: true });
  }
}

/** A semaphore that admits one holder too many. */
class SemaphoreOverAdmits extends MemoryBackend {
  override async acquire(request: AcquireRequest): Promise<AcquireResult> {
    return super.acquire(request.permits !== undefined && request.permits > 1 ? { ...request, permits: request.permits + 1 } : request);
  }
}

/** Tracks every acquirer as a waiter and never forgets one (a per-owner record that leaks). */
class WaitersNeverForgotten extends MemoryBackend {
  override async acquire(request: AcquireRequest): Promise<AcquireResult> {
    this.turns.track(request.owner);
    return super.acquire(request);
  }

  override async release(key: string, owner: string): Promise<boolean> {
    const released = await super.release(key, owner);
    this.turns.track(owner);
    return released;
  }
}

/** One shared object per run, as the contract asks of an in-memory backend. */
const shared = <T extends MemoryBackend>(make: () => T) => {
  const one = make();
  return () => one;
};

/** Read modes taken as plain locks: readers exclude each other. */
class ReadersExcludeEachOther extends MemoryBackend {
  override acquire(request: AcquireRequest): Promise<AcquireResult> {
    return super.acquire(request.mode === 'read' ? { ...request, mode: undefined } : request);
  }

  override extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    return super.extend(key, owner, ttlMs);
  }

  override release(key: string, owner: string): Promise<boolean> {
    return super.release(key, owner);
  }
}

/** An upgrade that gives the read back and tries for the key as a newcomer: a waiting writer may come first. */
class UpgradeLetsGo extends MemoryBackend {
  override async upgrade(key: string, owner: string, ttlMs: number): Promise<UpgradeResult> {
    await this.release(key, owner, { mode: 'upgradeable' });
    const grant = await this.acquire({ key, owner, ttlMs, queue: false });
    return grant.acquired ? { upgraded: true, token: grant.token } : { upgraded: false, held: false };
  }
}

describe('verifyLockBackend', () => {
  it('passes the sound MemoryBackend on every check it claims, and skips only what needs an unreachable server', async () => {
    const report = await verifyLockBackend({ create: shared(() => new MemoryBackend()), ...quick });
    expect(report.failed).toEqual([]);
    expect([...report.skipped].sort()).toEqual(['acquire-all-all-or-nothing', 'unreachable-bounded']);
    expect(report.passed).toEqual(expect.arrayContaining(['exclusion', 'waiters-served-in-order', 'tokens-increase', 'semaphore-admits-at-most-permits', 'inspect-reports-holds', 'force-release', 'bookkeeping-drains', 'nothing-left-behind', 'close']));
  }, 60_000);

  it.each([
    ['instances that do not share state', () => new MemoryBackend(), ['exclusion', 'owner-checked-release', 'stale-owner-cannot-touch-next-holder']],
    ['tokens that do not grow', shared(() => new ConstantTokens()), ['tokens-increase']],
    ['a release that does nothing', shared(() => new ReleaseDoesNothing()), ['owner-checked-release', 'stale-owner-cannot-touch-next-holder']],
    ['an extend that answers true for a non-owner', shared(() => new ExtendsForAnyone()), ['owner-checked-extend']],
    ['a release that deletes any holder', shared(() => new ReleaseDeletesAnyHolder()), ['owner-checked-release', 'stale-owner-cannot-touch-next-holder']],
    ["an inspect that leaves out the holder's token", shared(() => new InspectWithoutToken()), ['inspect-reports-holds']],
    ['a single try that stays queued', shared(() => new TryStaysQueued()), ['single-try-leaves-no-trace']],
    ['a semaphore that admits one too many', shared(() => new SemaphoreOverAdmits()), ['semaphore-admits-at-most-permits']],
    ['waiters it never forgets', shared(() => new WaitersNeverForgotten()), ['bookkeeping-drains']],
    ['readers that exclude each other', shared(() => new ReadersExcludeEachOther()), ['rw-readers-share-writer-alone']],
    ['an upgrade that lets go of the key first', shared(() => new UpgradeLetsGo()), ['rw-upgrade-without-window']],
  ])('reports %s', async (_what, create, expected) => {
    const report = await verifyLockBackend({ create, ...quick });
    expect(failedNames(report)).toEqual(expect.arrayContaining(expected));
    for (const failure of report.failed) expect(failure.reason).toMatch(/\S/);
  }, 120_000);

  it('reports every check failed, and throws nothing, when create() throws', async () => {
    const report = await verifyLockBackend({
      create: () => {
        throw new Error('no server');
      },
    });
    expect(report.passed).toEqual([]);
    expect(report.failed.length).toBeGreaterThan(10);
    expect(report.failed[0].reason).toContain('no server');
  });

  it('reports a check that hangs as failed after checkTimeoutMs, and goes on', async () => {
    class HangingInspect extends MemoryBackend {
      override inspect(): Promise<HeldLock | null> {
        return new Promise(() => undefined);
      }
    }
    const report = await verifyLockBackend({ create: shared(() => new HangingInspect()), ...quick, checkTimeoutMs: 1_000 });
    expect(report.failed.find((f) => f.check === 'inspect-reports-holds')?.reason).toContain('did not settle within 1000 ms');
    expect(report.passed).toContain('force-release');
  }, 60_000);

  it('runs only the named checks with `only`', async () => {
    const report = await verifyLockBackend({ create: shared(() => new MemoryBackend()), ...quick, only: ['exclusion'] });
    expect(report.passed).toEqual(['exclusion']);
    expect(report.failed).toEqual([]);
  });
});
