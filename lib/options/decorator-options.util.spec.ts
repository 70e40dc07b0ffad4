import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { DistributedLockOptions } from '../interfaces/distributed-lock-decorator-options.interface.js';
import { resolveMethodLock } from './decorator-options.util.js';
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
