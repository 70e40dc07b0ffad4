import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { resolveModuleOptions } from '../../options/module-options.util.js';
import { resolveRedlockOptions } from './redlock-backend.options.js';

const refused = (raw: unknown): InvalidLockOptionsError => {
  try {
    resolveRedlockOptions(raw, 'redlock');
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    return error as InvalidLockOptionsError;
  }
  throw new Error('expected the options to be refused');
};
const urls = (n: number): string[] => Array.from({ length: n }, (_, i) => `redis://10.0.0.${i + 1}:6379`);
/** Enough of an ioredis client for the checks. */
const client = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ status: 'ready', set() {}, evalsha() {}, eval() {}, duplicate() {}, ...extra });

describe('forRoot({ redlock }) options', () => {
  it('fills the defaults', () => {
    expect(resolveRedlockOptions({ urls: urls(3) }, 'redlock')).toEqual({
      urls: urls(3),
      options: undefined,
      clients: undefined,
      keyPrefix: 'lock:',
      nodeTimeoutMs: 200,
      connectTimeoutMs: 2_000,
      retryDelayMs: 50,
    });
    expect(resolveRedlockOptions({ urls: ['REDIS://a:1', 'redis://b:1', 'redis://c:1'] }, 'redlock').urls![0]).toBe('redis://a:1');
  });

  it('needs an odd number of masters, at least three, each a different server', () => {
    for (const n of [0, 1, 2, 4, 6]) {
      const error = refused({ urls: urls(n) });
      expect(error.field).toBe('redlock.urls');
      expect(error.message).toMatch(/odd number of independent Redis masters, at least 3/);
    }
    for (const n of [3, 5, 7]) expect(resolveRedlockOptions({ urls: urls(n) }, 'redlock').urls).toHaveLength(n);
    const same = refused({ urls: ['redis://a:6379', 'redis://b:6379', 'redis://user:pw@a:6379'] });
    expect(same.field).toBe('redlock.urls[2]');
    expect(same.message).not.toContain('pw'); // never echoes a password
    expect(refused({ urls: ['redis://a', 'redis://b:6379', 'redis://a:6379'] }).field).toBe('redlock.urls[2]'); // the default port
    expect(resolveRedlockOptions({ urls: ['redis://a:6379/0', 'redis://b:6379', 'redis://c:6379'] }, 'redlock').urls).toHaveLength(3);
    // Two databases of one server are one server: its loss would take two votes at once.
    expect(refused({ urls: ['redis://a:6379/0', 'redis://b:6379', 'redis://a:6379/1'] }).field).toBe('redlock.urls[2]');
    expect(refused({ urls: ['redis://a:6379', 'redis://b:6379', 'redis://a:6379/2'] }).field).toBe('redlock.urls[2]');
    // The loopback names of one port are one server; other ports on one machine are other servers.
    expect(refused({ urls: ['redis://localhost:7001', 'redis://b:6379', 'redis://127.0.0.1:7001'] }).field).toBe('redlock.urls[2]');
    expect(refused({ urls: ['redis://[::1]:7001', 'redis://b:6379', 'redis://localhost:7001'] }).field).toBe('redlock.urls[2]');
    expect(resolveRedlockOptions({ urls: ['redis://localhost:7001', 'redis://localhost:7002', 'redis://127.0.0.1:7003'] }, 'redlock').urls).toHaveLength(3);
    // Clients the application built: compared by the host and port they were given.
    const at = (host: string, port: number, db = 0): Record<string, unknown> => client({ options: { host, port, db } });
    expect(refused({ clients: [at('a', 6379), at('b', 6379), at('a', 6379, 3)] }).field).toBe('redlock.clients[2]');
    expect(resolveRedlockOptions({ clients: [at('a', 6379), at('b', 6379), at('c', 6379)] }, 'redlock').clients).toHaveLength(3);
  });

  it('refuses bad values naming the field', () => {
    expect(refused({}).field).toBe('redlock');
    expect(refused('redis://a').field).toBe('redlock');
    expect(refused({ urls: 'redis://a,redis://b,redis://c' }).field).toBe('redlock.urls');
    expect(refused({ urls: ['redis://a', 'http://b', 'redis://c'] }).field).toBe('redlock.urls[1]');
    expect(refused({ urls: urls(3), clients: [client(), client(), client()] }).field).toBe('redlock.clients');
    expect(refused({ clients: [client(), {}, client()] }).field).toBe('redlock.clients[1]');
    expect(refused({ clients: [client(), client({ isCluster: true }), client()] }).message).toMatch(/Cluster/);
    const one = client();
    expect(refused({ clients: [one, one, client()] }).field).toBe('redlock.clients');
    expect(refused({ clients: [client(), client()] }).field).toBe('redlock.clients');
    expect(refused({ urls: urls(3), nodeTimeoutMs: 0 }).field).toBe('redlock.nodeTimeoutMs');
    expect(refused({ urls: urls(3), retryDelayMs: 1.5 }).field).toBe('redlock.retryDelayMs');
    expect(refused({ urls: urls(3), options: 'x' }).field).toBe('redlock.options');
    expect(refused({ urls: urls(3), nodes: 3 }).field).toBe('redlock.nodes');
  });

  it('serves efficiency by default, never correctness', () => {
    expect(resolveModuleOptions({ redlock: { urls: urls(3) } }).purposes).toEqual({ efficiency: 'redlock' });
    expect(resolveModuleOptions({ redis: { url: 'redis://h:6379' }, redlock: { urls: urls(3) } }).purposes).toEqual({ efficiency: 'redis' });
    expect(resolveModuleOptions({ redlock: { urls: urls(3) }, etcd: { hosts: 'h:2379' } }).purposes).toEqual({ efficiency: 'redlock', correctness: 'etcd' });
    expect(() => resolveModuleOptions({ redlock: { urls: urls(3) }, purposes: { correctness: 'redlock' } })).toThrow(/"redlock" issues no fencing tokens/);
  });
});
