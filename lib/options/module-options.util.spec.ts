import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { DistributedLockModuleOptions } from '../interfaces/distributed-lock-options.interface.js';
import { MemoryBackend } from '../backends/memory/memory.backend.js';
import { driftAllowanceMs } from '../common/validity.util.js';
import { MIN_VALIDITY_MS, minTtlMs } from '../common/checks.util.js';
import { redactUrl, scrubCredentials } from '../common/redact.util.js';
import { redisHashTag } from '../backends/redis/redis-keys.util.js';
import { resolveModuleOptions, type ResolvedModuleOptions } from './module-options.util.js';

function errorOf(options: unknown): InvalidLockOptionsError {
  try {
    resolveModuleOptions(options as DistributedLockModuleOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    return error as InvalidLockOptionsError;
  }
  throw new Error('expected the options to be refused');
}

/** What the plugin registered under `name` made of its forRoot field. */
const settingsOf = (resolved: ResolvedModuleOptions, name: string): any => resolved.builtIn.find((b) => b.name === name)?.settings;

describe('resolveModuleOptions', () => {
  it('fills defaults and routes efficiency to redis', () => {
    const resolved = resolveModuleOptions({ redis: { url: 'redis://127.0.0.1:6379' } });
    expect(resolved.defaults).toEqual({ ttl: 30_000, wait: 10_000, watchdog: false, maxHold: undefined, lockDelay: 0 });
    expect(settingsOf(resolved, 'redis')).toMatchObject({ keyPrefix: 'lock:', connectTimeoutMs: 2000, commandTimeoutMs: 2000 });
    expect(resolved.purposes).toEqual({ efficiency: 'redis' });
    expect(resolved.driftFactor).toBe(0.01);
  });

  it('never routes correctness to the in-process memory backend by default (issue 12 #6)', () => {
    // Before: { efficiency: 'redis', correctness: 'memory' } — every replica "held" the same key.
    expect(resolveModuleOptions({ redis: { url: 'redis://h:1' }, memory: true }).purposes).toEqual({ efficiency: 'redis' });
    expect(resolveModuleOptions({ memory: true }).purposes).toEqual({ efficiency: 'memory' });
    // Asked for explicitly (tests), it is served.
    expect(resolveModuleOptions({ redis: { url: 'redis://h:1' }, memory: true, purposes: { correctness: 'memory' } }).purposes).toEqual({
      efficiency: 'redis',
      correctness: 'memory',
    });
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
    expect(settingsOf(resolved, 'etcd')).toMatchObject({ hosts: ['127.0.0.1:2379'], prefix: 'lock/', sessionTtlSeconds: 10, commandTimeoutMs: 2000 });
  });

  it('lets routing be configured, but never correctness onto a backend without fencing', () => {
    const both = { redis: { url: 'redis://h:1' }, etcd: { hosts: 'h:2379' } };
    expect(resolveModuleOptions({ ...both, purposes: { efficiency: 'etcd' } }).purposes.efficiency).toBe('etcd');
    expect(() => resolveModuleOptions({ ...both, purposes: { correctness: 'redis' } })).toThrow(/"purposes.correctness".*no fencing tokens/);
  });

  it('accepts a custom backend and reads its capabilities: a non-distributed one gets correctness only when named', () => {
    const resolved = resolveModuleOptions({ backends: { mine: new MemoryBackend('mine') } });
    expect(resolved.capabilities.mine.fencing).toBe(true);
    expect(resolved.purposes).toEqual({ efficiency: 'mine' });
    const distributed = { ...new MemoryBackend('d'), acquire() {}, waitForTurn() {}, extend() {}, release() {}, close() {} };
    Object.assign(distributed, { capabilities: { fencing: true, fairQueue: true, distributed: true } });
    expect(resolveModuleOptions({ backends: { d: distributed as never } }).purposes).toEqual({ efficiency: 'd', correctness: 'd' });
  });

  describe('credentials never appear in errors (issue 12 #9)', () => {
    it.each([
      ['redis://user:s3cret@h:99999', 'redis://***@h:99999'],
      ['http://user:s3cret@h:6379', 'http://***@h:6379'],
      ['redis//:s3cret@h:6379', '***@h:6379'],
      ['redis://h:99999?password=s3cret', 'redis://h:99999?***'],
      ['redis://:s3cret@[::1', 'redis://***@[::1'],
    ])('masks %s as %s in the redis.url error', (url, shown) => {
      const error = errorOf({ redis: { url } });
      expect(error.field).toBe('redis.url');
      expect(error.message).toContain(shown);
      expect(error.message).not.toMatch(/s3cret|p@ss|w:rd/);
    });

    it('does not print an object given as the url, nor objects among etcd hosts', () => {
      const url = errorOf({ redis: { url: { host: 'h', password: 's3cret' } } });
      expect(url.message).not.toContain('s3cret');
      const hosts = errorOf({ etcd: { hosts: ['http://root:s3cret@h:2379', { password: 's3cret' }] } });
      expect(hosts.field).toBe('etcd.hosts');
      expect(hosts.message).toContain('"http://***@h:2379"');
      expect(hosts.message).not.toContain('s3cret');
    });

    it('masks up to the last @ (an unencoded password may hold @ / :) and drops the query', () => {
      expect(redactUrl('redis://:p@ss/w:rd@h:1/0')).toBe('redis://***@h:1/0');
      expect(redactUrl('redis://h:1/0?password=x#y')).toBe('redis://h:1/0?***');
      expect(redactUrl('redis://h:1')).toBe('redis://h:1');
    });

    it('masks credentials in free text (client error messages)', () => {
      expect(scrubCredentials('connect to rediss://admin:s3cret@h:6380 failed')).toBe('connect to rediss://***@h:6380 failed');
    });
  });

  it('accepts the URL scheme in any case and hands ioredis a lower-case one (REDISS:// must still mean TLS)', () => {
    expect(settingsOf(resolveModuleOptions({ redis: { url: 'REDIS://h:1/2' } }), 'redis').url).toBe('redis://h:1/2');
    expect(settingsOf(resolveModuleOptions({ redis: { url: 'Rediss://:pw@h:1' } }), 'redis').url).toBe('rediss://:pw@h:1');
  });

  describe('ttl must leave validity after the drift allowance (issue 12 #10)', () => {
    it('needs 10 ms of validity: 12 ms with the default driftFactor, more with a larger one', () => {
      expect(MIN_VALIDITY_MS).toBe(10);
      expect(minTtlMs(0.01)).toBe(12);
      expect(minTtlMs(0)).toBe(12);
      expect(minTtlMs(0.49)).toBe(22); // 22 − floor(10.78) − 2 = 10
      for (const f of [0, 0.01, 0.1, 0.3, 0.49]) {
        const min = minTtlMs(f);
        expect(min - driftAllowanceMs(min, f)).toBeGreaterThanOrEqual(MIN_VALIDITY_MS);
        expect(min - 1 - driftAllowanceMs(min - 1, f)).toBeLessThan(MIN_VALIDITY_MS);
      }
    });

    it.each([[1], [2], [3], [11]])('refuses defaults.ttl %i', (ttl) => {
      const error = errorOf({ memory: true, defaults: { ttl } });
      expect(error.field).toBe('defaults.ttl');
      expect(error.message).toMatch(/at least 12 ms/);
    });

    it('judges defaults.ttl with the configured driftFactor', () => {
      expect(resolveModuleOptions({ memory: true, defaults: { ttl: 12 } }).defaults.ttl).toBe(12);
      expect(errorOf({ memory: true, driftFactor: 0.4, defaults: { ttl: 12 } }).field).toBe('defaults.ttl');
    });
  });

  describe('prefixes (issue 12 #4, #11)', () => {
    it.each([
      [{ redis: { url: 'redis://h:1', keyPrefix: 'lock\uD800:' } }, 'redis.keyPrefix'],
      [{ redis: { url: 'redis://h:1', keyPrefix: '\uDC00' } }, 'redis.keyPrefix'],
      [{ etcd: { hosts: 'h:2379', prefix: 'lock/\uDBFF' } }, 'etcd.prefix'],
    ])('refuses a lone surrogate: %j', (options, field) => {
      expect(errorOf(options).field).toBe(field);
    });

    it('refuses a key prefix with an empty hash tag on a Cluster client only', () => {
      const client = { status: 'ready', set() {}, evalsha() {}, eval() {}, duplicate() {} };
      expect(settingsOf(resolveModuleOptions({ redis: { client: client as never, keyPrefix: 'a{}b:' } }), 'redis').keyPrefix).toBe('a{}b:');
      const error = errorOf({ redis: { client: { ...client, isCluster: true }, keyPrefix: 'a{}b:' } });
      expect(error.field).toBe('redis.keyPrefix');
      expect(error.message).toMatch(/empty hash tag/);
      expect(settingsOf(resolveModuleOptions({ redis: { client: { ...client, isCluster: true } as never, keyPrefix: 'app{x}:' } }), 'redis').keyPrefix).toBe('app{x}:');
    });

    it('mirrors Redis Cluster hash-tag rules', () => {
      expect(redisHashTag('lock:{k}')).toBe('k');
      expect(redisHashTag('lock:{}k}')).toBeUndefined();
      expect(redisHashTag('lock:{{}}')).toBe('{');
      expect(redisHashTag('lock:{a}b{c}:q')).toBe('a');
      expect(redisHashTag('lock:k}')).toBeUndefined();
      expect(redisHashTag('lock:{k')).toBeUndefined();
    });
  });
});
