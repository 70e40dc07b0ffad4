import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { resolveModuleOptions } from '../../options/module-options.util.js';
import { resolveZooKeeperOptions } from './zookeeper-backend.options.js';
import { ancestry, inLineOrder, isNodeOf, lockParent, nodeNamePrefix, pathSegment } from './zookeeper-paths.util.js';

const refused = (raw: unknown): InvalidLockOptionsError => {
  try {
    resolveZooKeeperOptions(raw, 'zookeeper');
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    return error as InvalidLockOptionsError;
  }
  throw new Error('expected the options to be refused');
};

describe('forRoot({ zookeeper }) options', () => {
  it('fills the defaults', () => {
    expect(resolveZooKeeperOptions({ connectionString: '127.0.0.1:2181' }, 'zookeeper')).toEqual({
      connectionString: '127.0.0.1:2181',
      client: undefined,
      sessionTimeoutMs: 10_000,
      prefix: '/nest-distributed-lock',
      connectTimeoutMs: 5_000,
      commandTimeoutMs: 2_000,
    });
  });

  it('accepts ensembles, IPv6 and a chroot', () => {
    for (const connectionString of ['zk1:2181,zk2:2181,zk3:2181', '[::1]:2181', 'zk.internal:2181/app', 'a:1,b:2/x/y']) {
      expect(resolveZooKeeperOptions({ connectionString }, 'zookeeper').connectionString).toBe(connectionString);
    }
  });

  it('refuses bad values naming the field', () => {
    expect(refused({}).field).toBe('zookeeper.connectionString');
    expect(refused({ connectionString: 'host' }).field).toBe('zookeeper.connectionString');
    expect(refused({ connectionString: 'h:1, h:2' }).field).toBe('zookeeper.connectionString');
    expect(refused({ connectionString: 42 }).field).toBe('zookeeper.connectionString');
    expect(refused('127.0.0.1:2181').field).toBe('zookeeper');
    expect(refused({ connectionString: 'h:1', sessionTimeoutMs: 0 }).field).toBe('zookeeper.sessionTimeoutMs');
    expect(refused({ connectionString: 'h:1', sessionTimeoutMs: 2.5 }).field).toBe('zookeeper.sessionTimeoutMs');
    expect(refused({ connectionString: 'h:1', sessionTimeoutMs: 2 ** 40 }).field).toBe('zookeeper.sessionTimeoutMs');
    expect(refused({ connectionString: 'h:1', commandTimeoutMs: -1 }).field).toBe('zookeeper.commandTimeoutMs');
    expect(refused({ connectionString: 'h:1', sessionTimout: 1 }).message).toMatch(/sessionTimout/);
    for (const prefix of ['locks', '/locks/', '/a//b', '/a/./b', '/a/..', '/zookeeper', '/zookeeper/quota', '/ü', '/a b', '']) {
      expect(refused({ connectionString: 'h:1', prefix }).field).toBe('zookeeper.prefix');
    }
  });

  it('takes an application client instead of a connection string, not both, and not its session timeout', () => {
    const client = { create() {}, remove() {}, getChildren() {}, exists() {}, transaction() {}, getState() {}, getSessionTimeout() {} };
    expect(resolveZooKeeperOptions({ client }, 'zookeeper').client).toBe(client);
    expect(refused({ client: {} }).field).toBe('zookeeper.client');
    // Multi-ops (a create with its czxid, a release's hand-over) need transaction(): refused at bootstrap, not at the first acquire.
    const { transaction: _, ...withoutMulti } = client;
    expect(refused({ client: withoutMulti })).toMatchObject({ field: 'zookeeper.client', message: expect.stringContaining('no transaction()') });
    expect(refused({ client, connectionString: 'h:1' }).field).toBe('zookeeper.client');
    expect(refused({ client, sessionTimeoutMs: 1000 }).field).toBe('zookeeper.sessionTimeoutMs');
  });
});

describe('default routing with ZooKeeper', () => {
  const zk = { connectionString: 'h:2181' };
  it('alone, it serves both purposes', () => {
    expect(resolveModuleOptions({ zookeeper: zk }).purposes).toEqual({ efficiency: 'zookeeper', correctness: 'zookeeper' });
  });
  it('correctness: etcd first, else ZooKeeper, else PostgreSQL; efficiency: Redis, else the first distributed backend', () => {
    expect(resolveModuleOptions({ etcd: { hosts: 'h:2379' }, zookeeper: zk, postgres: { connectionString: 'postgres://h/db' } }).purposes).toEqual({
      efficiency: 'etcd',
      correctness: 'etcd',
    });
    expect(resolveModuleOptions({ postgres: { connectionString: 'postgres://h/db' }, zookeeper: zk }).purposes).toEqual({
      efficiency: 'zookeeper',
      correctness: 'zookeeper',
    });
    expect(resolveModuleOptions({ redis: { url: 'redis://h:6379' }, zookeeper: zk }).purposes).toEqual({ efficiency: 'redis', correctness: 'zookeeper' });
    expect(resolveModuleOptions({ zookeeper: zk, postgres: { connectionString: 'postgres://h/db' }, purposes: { correctness: 'postgres' } }).purposes).toEqual({
      efficiency: 'zookeeper',
      correctness: 'postgres',
    });
  });
});

describe('ZooKeeper paths', () => {
  it('gives every key one plain segment: no slash, no relative segment, distinct keys distinct', () => {
    const keys = ['a', 'a/b', 'a%2Fb', '.', '..', '...', '{x}', 'ключ', '🔒', ' ', '\u0000', '\uFFFF'];
    const segments = keys.map((k) => pathSegment(k, 'zookeeper'));
    expect(new Set(segments).size).toBe(keys.length);
    for (const s of segments) {
      expect(s).not.toContain('/');
      expect(['.', '..']).not.toContain(s);
      expect(s).toMatch(/^[\x21-\x7e]+$/);
    }
    expect(lockParent('/p', 'a/b', 'zookeeper')).toBe('/p/a%2Fb');
    expect(() => pathSegment('k\uD800', 'zookeeper')).toThrow(InvalidLockOptionsError);
  });

  it('orders a line by the sequence ZooKeeper appended, whatever the owner names', () => {
    expect(inLineOrder(['zz-0000000003', 'aa-0000000010', 'mm-0000000001'])).toEqual(['mm-0000000001', 'zz-0000000003', 'aa-0000000010']);
    expect(isNodeOf(`${nodeNamePrefix('o1', 'zookeeper')}0000000042`, nodeNamePrefix('o1', 'zookeeper'))).toBe(true);
    expect(isNodeOf(`${nodeNamePrefix('o1x', 'zookeeper')}0000000042`, nodeNamePrefix('o1', 'zookeeper'))).toBe(false);
    expect(ancestry('/a/b/c')).toEqual(['/a', '/a/b', '/a/b/c']);
  });
});
