import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { DistributedLockModuleOptions } from '../../interfaces/distributed-lock-options.interface.js';
import { resolveModuleOptions } from '../../options/module-options.util.js';
import { objectNames } from './postgres-sql.util.js';

const fieldOf = (options: unknown): string => {
  try {
    resolveModuleOptions(options as DistributedLockModuleOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    return (error as InvalidLockOptionsError).field;
  }
  throw new Error('expected the options to be refused');
};

const url = 'postgres://app@127.0.0.1:5432/app';
const pool = { query: () => Promise.resolve({ rows: [] }), connect: () => Promise.reject(new Error('no')), end: () => Promise.resolve(), on: () => undefined };

describe('forRoot({ postgres }): options and routing (design §6)', () => {
  it('alone, serves both purposes', () => {
    expect(resolveModuleOptions({ postgres: { connectionString: url } }).purposes).toEqual({ efficiency: 'postgres', correctness: 'postgres' });
  });

  it('beside Redis takes correctness; with etcd too, correctness goes to etcd unless named', () => {
    expect(resolveModuleOptions({ redis: { url: 'redis://h:1' }, postgres: { connectionString: url } }).purposes).toEqual({ efficiency: 'redis', correctness: 'postgres' });
    const all = { redis: { url: 'redis://h:1' }, etcd: { hosts: 'h:2379' }, postgres: { connectionString: url } };
    expect(resolveModuleOptions(all).purposes).toEqual({ efficiency: 'redis', correctness: 'etcd' });
    expect(resolveModuleOptions({ ...all, purposes: { correctness: 'postgres' } }).purposes.correctness).toBe('postgres');
  });

  it('fills the defaults written once', () => {
    const resolved = resolveModuleOptions({ postgres: { connectionString: url } });
    expect(resolved.builtIn.find((b) => b.name === 'postgres')?.settings).toEqual({
      connectionString: url,
      pool: undefined,
      schema: 'public',
      tablePrefix: 'nest_lock',
      maxConnections: 4,
      connectTimeoutMs: 2000,
      commandTimeoutMs: 2000,
    });
  });

  it.each([
    [{ postgres: {} }, 'postgres.connectionString'],
    [{ postgres: 'postgres://h/db' }, 'postgres'],
    [{ postgres: { connectionString: 'mysql://h/db' } }, 'postgres.connectionString'],
    [{ postgres: { connectionString: url, pool } }, 'postgres.pool'],
    [{ postgres: { pool: {} } }, 'postgres.pool'],
    [{ postgres: { pool, maxConnections: 2 } }, 'postgres.maxConnections'],
    [{ postgres: { connectionString: url, maxConnections: 0 } }, 'postgres.maxConnections'],
    [{ postgres: { connectionString: url, maxConnections: 2.5 } }, 'postgres.maxConnections'],
    [{ postgres: { connectionString: url, schema: 'Public' } }, 'postgres.schema'],
    [{ postgres: { connectionString: url, schema: 'a"; DROP TABLE t; --' } }, 'postgres.schema'],
    [{ postgres: { connectionString: url, tablePrefix: '' } }, 'postgres.tablePrefix'],
    [{ postgres: { connectionString: url, commandTimeoutMs: 1e12 } }, 'postgres.commandTimeoutMs'],
    [{ postgres: { connectionString: url, ttl: 5 } }, 'postgres.ttl'],
  ])('refuses %j naming %s', (options, field) => {
    expect(fieldOf(options)).toBe(field);
  });

  it('quotes every name it splices into SQL, and keeps backends with other prefixes apart', () => {
    const a = objectNames({ schema: 'locks', prefix: 'app_a' });
    const b = objectNames({ schema: 'locks', prefix: 'app_b' });
    expect(a.held).toBe('"locks"."app_a_held"');
    expect(a.acquire).not.toBe(b.acquire);
    expect(a.channel).not.toBe(b.channel);
  });
});
