import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockOptions } from '../interfaces/lock-options.interface.js';
import { resolveLockOptions } from './lock-options.util.js';
import { resolveModuleOptions } from './module-options.util.js';

const redisOnly = resolveModuleOptions({ redis: { url: 'redis://h:1' } });
const both = resolveModuleOptions({
  redis: { url: 'redis://h:1' },
  memory: true,
  purposes: { correctness: 'memory' },
  defaults: { ttl: 500, wait: 0 },
});

function fieldOf(key: unknown, opts: unknown, module = both): string {
  try {
    resolveLockOptions(key, opts as LockOptions, module, 'test()');
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as Error).message).toContain('test()');
    return (error as InvalidLockOptionsError).field;
  }
  throw new Error('expected the options to be refused');
}

describe('resolveLockOptions', () => {
  it('applies module defaults and routes by purpose', () => {
    expect(resolveLockOptions('k', { purpose: 'efficiency' }, both, 'x')).toMatchObject({ ttl: 500, wait: 0, backend: 'redis' });
    expect(resolveLockOptions('k', { purpose: 'correctness', ttl: 12 }, both, 'x')).toMatchObject({ ttl: 12, backend: 'memory' });
  });

  it.each([
    ['', { purpose: 'efficiency' }, 'key'],
    [42, { purpose: 'efficiency' }, 'key'],
    ['x'.repeat(1025), { purpose: 'efficiency' }, 'key'],
    ['k', {}, 'purpose'],
    ['k', { purpose: 'speed' }, 'purpose'],
    ['k', { purpose: 'efficiency', ttl: 0 }, 'ttl'],
    ['k', { purpose: 'efficiency', ttl: -1 }, 'ttl'],
    ['k', { purpose: 'efficiency', ttl: 2 }, 'ttl'], // issue 12 #10: at the drift allowance, every grant is expired
    ['k', { purpose: 'efficiency', ttl: 11 }, 'ttl'],
    ['k\uD800', { purpose: 'efficiency' }, 'key'], // issue 12 #11: lone surrogates
    ['k\uDC00', { purpose: 'efficiency' }, 'key'],
    ['\uDC00\uD800', { purpose: 'efficiency' }, 'key'],
    ['k', { purpose: 'efficiency', wait: -1 }, 'wait'],
    ['k', { purpose: 'efficiency', backend: 'nope' }, 'backend'],
    ['k', { purpose: 'efficiency', signal: {} }, 'signal'],
    ['k', { purpose: 'efficiency', tll: 5 }, 'tll'],
    ['k', { purpose: 'correctness', backend: 'redis' }, 'backend'],
    ['k', { purpose: 'efficiency', watchdog: true }, 'maxHold'],
    ['k', { purpose: 'efficiency', watchdog: 'yes' }, 'watchdog'],
    ['k', { purpose: 'efficiency', watchdog: true, ttl: 1_000, maxHold: 500 }, 'maxHold'],
    ['k', { purpose: 'efficiency', maxHold: 5_000 }, 'maxHold'],
    ['k', { purpose: 'efficiency', ttl: 1_000, lockAtLeastFor: 1_001 }, 'lockAtLeastFor'],
    ['k', { purpose: 'efficiency', lockDelay: -1 }, 'lockDelay'],
    ['k', { purpose: 'efficiency', rejectOnLoss: 1 }, 'rejectOnLoss'],
  ])('refuses key %j with %j naming %s', (key, opts, field) => {
    expect(fieldOf(key, opts)).toBe(field);
  });

  it('resolves the lease policy: watchdog capped by maxHold (or the module default), at-least, lock-delay', () => {
    const withDefaults = resolveModuleOptions({ memory: true, defaults: { ttl: 1_000, watchdog: true, maxHold: 9_000, lockDelay: 50 } });
    expect(resolveLockOptions('k', { purpose: 'efficiency', lockAtLeastFor: 300 }, withDefaults, 'x').policy).toEqual({
      watchdog: { maxHold: 9_000 },
      lockAtLeastFor: 300,
      lockDelay: 50,
      rejectOnLoss: false,
    });
    expect(resolveLockOptions('k', { purpose: 'efficiency', watchdog: false }, withDefaults, 'x').policy.watchdog).toBeUndefined();
  });

  it('accepts well-formed astral keys and the smallest ttl that leaves 10 ms of validity', () => {
    expect(resolveLockOptions('k\uD83D\uDD12', { purpose: 'efficiency', ttl: 12 }, both, 'x')).toMatchObject({ key: 'k\uD83D\uDD12', ttl: 12 });
    const drifty = resolveModuleOptions({ memory: true, driftFactor: 0.4 });
    expect(fieldOf('k', { purpose: 'efficiency', ttl: 12 }, drifty)).toBe('ttl');
    expect(() => resolveLockOptions('k', { purpose: 'efficiency', ttl: 2 }, both, 'x')).toThrow(/"ttl".*at least 12 ms, got 2/);
  });

  it('refuses correctness on memory unless purposes.correctness names it (issue 12 #6)', () => {
    const implicit = resolveModuleOptions({ redis: { url: 'redis://h:1' }, memory: true });
    expect(fieldOf('k', { purpose: 'correctness' }, implicit)).toBe('purpose');
    expect(() => resolveLockOptions('k', { purpose: 'correctness' }, implicit, 'x')).toThrow(/memory lives in one process.*purposes\.correctness/);
    expect(resolveLockOptions('k', { purpose: 'correctness' }, both, 'x').backend).toBe('memory');
  });

  it('refuses correctness when no backend issues fencing tokens, and says what to configure', () => {
    expect(fieldOf('k', { purpose: 'correctness' }, redisOnly)).toBe('purpose');
    expect(() => resolveLockOptions('k', { purpose: 'correctness' }, redisOnly, 'x')).toThrow(/fencing tokens.*configure etcd/);
  });
});
