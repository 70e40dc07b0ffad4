import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { DistributedLockModuleOptions } from '../interfaces/distributed-lock-options.interface.js';
import { MemoryBackend } from '../backends/memory/memory.backend.js';
import { resolveModuleOptions } from './module-options.util.js';

function errorOf(options: unknown): InvalidLockOptionsError {
  try {
    resolveModuleOptions(options as DistributedLockModuleOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    return error as InvalidLockOptionsError;
  }
  throw new Error('expected the options to be refused');
}

describe('resolveModuleOptions', () => {
  it('fills defaults and routes efficiency to redis', () => {
    const resolved = resolveModuleOptions({ redis: { url: 'redis://127.0.0.1:6379' } });
    expect(resolved.defaults).toEqual({ ttl: 30_000, wait: 10_000, watchdog: false, maxHold: undefined, lockDelay: 0 });
    expect(resolved.redis).toMatchObject({ keyPrefix: 'lock:', connectTimeoutMs: 2000, commandTimeoutMs: 2000 });
    expect(resolved.purposes).toEqual({ efficiency: 'redis' });
    expect(resolved.driftFactor).toBe(0.01);
  });

  it('routes correctness to a fencing backend and efficiency to redis when both exist', () => {
    const resolved = resolveModuleOptions({ redis: { url: 'redis://h:1' }, memory: true });
    expect(resolved.purposes).toEqual({ efficiency: 'redis', correctness: 'memory' });
  });

  it.each([
    [{}, 'options'],
    [{ redis: { url: 'http://127.0.0.1:6379' } }, 'redis.url'],
    [{ redis: {} }, 'redis'],
    [{ redis: { url: 'redis://h:1', nope: 1 } }, 'redis.nope'],
    [{ redis: { url: 'redis://h:1', commandTimeoutMs: 0 } }, 'redis.commandTimeoutMs'],
    [{ redis: { url: 'redis://h:1', client: {} } }, 'redis.client'],
    [{ memory: true, defaults: { ttl: 0 } }, 'defaults.ttl'],
    [{ memory: true, defaults: { ttl: -5 } }, 'defaults.ttl'],
    [{ memory: true, defaults: { ttl: 1.5 } }, 'defaults.ttl'],
    [{ memory: true, defaults: { wait: -1 } }, 'defaults.wait'],
    [{ memory: true, purposes: { efficiency: 'zookeeper' } }, 'purposes.efficiency'],
    [{ memory: true, purposes: { speed: 'memory' } }, 'purposes.speed'],
    [{ redis: { url: 'redis://h:1' }, purposes: { correctness: 'redis' } }, 'purposes.correctness'],
    [{ memory: true, backends: { mine: { acquire() {} } } }, 'backends.mine'],
    [{ memory: true, driftFactor: 2 }, 'driftFactor'],
    [{ memory: true, etcdd: {} }, 'etcdd'],
    [{ etcd: {} }, 'etcd.hosts'],
    [{ etcd: { hosts: [] } }, 'etcd.hosts'],
    [{ etcd: { hosts: '127.0.0.1:2379', sessionTtlSeconds: 0.5 } }, 'etcd.sessionTtlSeconds'],
    [{ etcd: { hosts: '127.0.0.1:2379', client: {} } }, 'etcd.client'],
    [{ etcd: { hosts: '127.0.0.1:2379', ttl: 5 } }, 'etcd.ttl'],
  ])('refuses %j naming the field %s', (options, field) => {
    const error = errorOf(options);
    expect(error.field).toBe(field);
    expect(error.message).toContain(`"${field}"`);
  });

  it('routes efficiency to redis and correctness to etcd when both are configured', () => {
    const resolved = resolveModuleOptions({ redis: { url: 'redis://h:1' }, etcd: { hosts: '127.0.0.1:2379' }, memory: true });
    expect(resolved.purposes).toEqual({ efficiency: 'redis', correctness: 'etcd' });
    expect(resolved.etcd).toMatchObject({ hosts: ['127.0.0.1:2379'], prefix: 'lock/', sessionTtlSeconds: 10, commandTimeoutMs: 2000 });
  });

  it('lets routing be configured, but never correctness onto a backend without fencing', () => {
    const both = { redis: { url: 'redis://h:1' }, etcd: { hosts: 'h:2379' } };
    expect(resolveModuleOptions({ ...both, purposes: { efficiency: 'etcd' } }).purposes.efficiency).toBe('etcd');
    expect(() => resolveModuleOptions({ ...both, purposes: { correctness: 'redis' } })).toThrow(/"purposes.correctness".*no fencing tokens/);
  });

  it('accepts a custom backend and reads its capabilities', () => {
    const resolved = resolveModuleOptions({ backends: { mine: new MemoryBackend('mine') } });
    expect(resolved.capabilities.mine.fencing).toBe(true);
    expect(resolved.purposes).toEqual({ efficiency: 'mine', correctness: 'mine' });
  });
});
