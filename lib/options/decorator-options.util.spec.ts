import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { DistributedLockOptions } from '../interfaces/distributed-lock-decorator-options.interface.js';
import { refuseConflictingLocks, resolveMethodLock } from './decorator-options.util.js';
import { resolveModuleOptions } from './module-options.util.js';

const module = resolveModuleOptions({ redis: { url: 'redis://h:1' }, memory: true });

function refused(options: unknown, mod = module): InvalidLockOptionsError {
  try {
    resolveMethodLock(options as DistributedLockOptions, 'DigestJob', 'run', 'scheduled', mod);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as Error).message).toContain('@DistributedLock on DigestJob.run');
    return error as InvalidLockOptionsError;
  }
  throw new Error('expected the options to be refused');
}

describe('resolveMethodLock (issue 12)', () => {
  it('refuses a ttl at or below the drift allowance at bootstrap (#10)', () => {
    expect(refused({ purpose: 'efficiency', ttl: 2 }).field).toBe('ttl');
    expect(refused({ purpose: 'efficiency', ttl: 11 }).field).toBe('ttl');
    expect(resolveMethodLock({ purpose: 'efficiency', ttl: 12 }, 'DigestJob', 'run', 'scheduled', module).ttl).toBe(12);
  });

  it('refuses a string key with a lone surrogate (#11)', () => {
    expect(refused({ purpose: 'efficiency', key: 'digest\uD800' }).field).toBe('key');
  });

  it('refuses a correctness method when only the memory backend could serve it implicitly (#6)', () => {
    const error = refused({ purpose: 'correctness' });
    expect(error.field).toBe('purpose');
    expect(error.message).toMatch(/purposes\.correctness/);
  });
});

describe('refuseConflictingLocks (issue 13, finding 10)', () => {
  const both = resolveModuleOptions({ redis: { url: 'redis://h:1' }, etcd: { hosts: ['h:2379'] } });
  const lock = (options: Record<string, unknown>, className = 'Ledger', mod = both) =>
    resolveMethodLock({ key: 'k', ...options } as unknown as DistributedLockOptions, className, 'post', 'provider', mod);
  const conflict = (...locks: ReturnType<typeof lock>[]): InvalidLockOptionsError => {
    try {
      refuseConflictingLocks(locks);
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      return error as InvalidLockOptionsError;
    }
    throw new Error('expected a conflict');
  };

  it('refuses one static key for two purposes on one backend, naming the method', () => {
    const etcdOnly = resolveModuleOptions({ etcd: { hosts: ['h:2379'] } });
    const error = conflict(lock({ purpose: 'correctness' }, 'Ledger', etcdOnly), lock({ purpose: 'efficiency' }, 'Ledger', etcdOnly));
    expect(error.field).toBe('purpose');
    expect(error.message).toContain('@DistributedLock on Ledger.post');
    expect(error.message).toContain('a second time on the same method');
  });

  it('names the overridden method when the conflict is with it', () => {
    const etcdOnly = resolveModuleOptions({ etcd: { hosts: ['h:2379'] } });
    const error = conflict(lock({ purpose: 'efficiency' }, 'Sub', etcdOnly), lock({ purpose: 'correctness' }, 'Base', etcdOnly));
    expect(error.field).toBe('purpose');
    expect(error.message).toContain('@DistributedLock on Sub.post');
    expect(error.message).toContain('again on Base.post, which it overrides');
  });

  it('accepts what can be held together: one purpose (whatever the settings), different keys or backends, key functions', () => {
    const ok = (...locks: ReturnType<typeof lock>[]) => expect(() => refuseConflictingLocks(locks)).not.toThrow();
    ok(lock({ purpose: 'efficiency', onBusy: 'skip' }), lock({ purpose: 'efficiency', wait: 100, rejectOnLoss: true }));
    ok(lock({ purpose: 'efficiency', ttl: 1_000, lockDelay: 10 }), lock({ purpose: 'efficiency', ttl: 2_000, watchdog: true, maxHold: 60_000, lockAtLeastFor: 10 }));
    ok(lock({ purpose: 'efficiency', key: 'a' }), lock({ purpose: 'correctness', key: 'b' }));
    // Redis serves efficiency, etcd correctness: two locks.
    ok(lock({ purpose: 'efficiency' }), lock({ purpose: 'correctness' }));
    ok(lock({ purpose: 'efficiency', backend: 'redis', ttl: 1_000 }), lock({ purpose: 'efficiency', backend: 'etcd', ttl: 2_000 }));
    ok(lock({ purpose: 'efficiency', key: () => 'k' }), lock({ purpose: 'correctness', key: () => 'k' }));
  });
});
