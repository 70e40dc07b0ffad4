import { Redis } from 'ioredis';
import { InvalidLockOptionsError, LockBackendUnavailableError, type Lease } from '../../lib/index.js';
import { backendCases, freshRedlock, type BackendServer } from '../harness/backend-servers.js';
import { redisUrl, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

// list() against real servers: a holder's application and an operator's (another process as far
// as the backend knows) share the server; the operator lists what the holder holds.

async function slowerRedlock(): Promise<BackendServer> {
  const started = await freshRedlock();
  return { ...started, options: { redlock: { ...started.options.redlock!, nodeTimeoutMs: 1_000 } } };
}

// Redlock with a node timeout above the 200 ms default: a full run's two workers on two cores delayed a batch of inspections past it.
const CASES = backendCases().map((c) => (c.name === 'redlock' ? { ...c, server: slowerRedlock } : c));

/** Keys an attacker or an unlucky naming scheme would pick; each must come back exactly as named. */
const ODD = ['a', 'ab', 'a/b', 'a.b', '{tag}x', 'x}y', 'pct%25', 'x%y', 'x_y', 'xzy', 'sp ace', 'quote"\'', '<img src=x onerror=alert(1)>', 'emoji-😀', 'ünï'];

describe.each(CASES)('list() on $name', ({ backend, server, purpose, semaphores, fencing }) => {
  let running: BackendServer;
  let holder: LockApp;
  let operator: LockApp;
  const target = { backend };
  beforeAll(async () => {
    running = await server();
    [holder, operator] = await Promise.all([startLockApp(running.options), startLockApp(running.options)]);
  }, 60_000);
  afterAll(async () => {
    await holder?.close();
    await operator?.close();
    await running?.stop();
  });

  it('reports every held key exactly as named, whoever holds it; released and force-released keys are gone', async () => {
    const p = `${uniqueKey('list')}/`;
    const leases: Lease[] = [];
    for (const name of ODD) leases.push(await holder.locks.acquire(p + name, { purpose, ttl: 20_000 }));
    const sem = semaphores ? await holder.locks.acquire(`${p}sem`, { purpose, ttl: 20_000, permits: 2 }) : undefined;

    const listed = await operator.locks.list(target, { prefix: p });
    const expected = [...ODD.map((name) => p + name), ...(sem ? [`${p}sem`] : [])];
    expect(listed.map((info) => info.key).sort()).toEqual(expected.sort());
    for (const info of listed) {
      expect(info.backend).toBe(backend);
      expect(info.remainingMs).toBeGreaterThan(0);
      expect(info.remainingMs).toBeLessThanOrEqual(20_000);
      // Seen from another process: no local knowledge.
      expect(info.local).toBeUndefined();
      if (fencing && info.permits === undefined) expect(info.token).toBe(leases[ODD.indexOf(info.key.slice(p.length))].token);
    }
    if (sem) expect(listed.find((info) => info.key === `${p}sem`)).toMatchObject({ permits: 2, holders: 1 });

    // The holder's own process knows more: how long, for what, the token on every fencing backend.
    const mine = await holder.locks.list(target, { prefix: `${p}a` });
    expect(mine.map((info) => info.key).sort()).toEqual([`${p}a`, `${p}a.b`, `${p}a/b`, `${p}ab`]);
    for (const info of mine) {
      expect(info).toMatchObject({ local: true, purpose });
      expect(info.heldForMs).toBeGreaterThanOrEqual(0);
      expect(info.token).toBe(leases[ODD.indexOf(info.key.slice(p.length))].token);
    }

    await leases[0].release();
    expect(await operator.locks.forceRelease(`${p}ab`, target)).toBe(true);
    const after = (await operator.locks.list(target, { prefix: p })).map((info) => info.key);
    expect(after).not.toContain(`${p}a`);
    expect(after).not.toContain(`${p}ab`);
    expect(after).toContain(`${p}a/b`);
    for (const lease of [...leases, ...(sem ? [sem] : [])]) await lease.release().catch(() => undefined);
    expect(await operator.locks.list(target, { prefix: p })).toEqual([]);
  }, 60_000);

  it('filters by the key as named (wildcards are literal) and reports at most limit, newest first', async () => {
    const p = `${uniqueKey('list-filter')}/`;
    const leases: Lease[] = [];
    for (const name of ['x%y', 'x_y', 'xzy', 'x\\y']) leases.push(await holder.locks.acquire(p + name, { purpose, ttl: 20_000 }));
    expect((await operator.locks.list(target, { prefix: `${p}x%` })).map((i) => i.key)).toEqual([`${p}x%y`]);
    expect((await operator.locks.list(target, { prefix: `${p}x_` })).map((i) => i.key)).toEqual([`${p}x_y`]);
    expect((await operator.locks.list(target, { prefix: `${p}x\\` })).map((i) => i.key)).toEqual([`${p}x\\y`]);
    expect(await operator.locks.list(target, { prefix: `${p}y` })).toEqual([]);

    for (let i = 0; i < 6; i++) {
      leases.push(await holder.locks.acquire(`${p}n${i}`, { purpose, ttl: 20_000 }));
      await sleep(15);
    }
    expect(await operator.locks.list(target, { prefix: `${p}n`, limit: 4 })).toHaveLength(4);
    // The holder's process knows each grant's time: newest first.
    expect((await holder.locks.list(target, { prefix: `${p}n`, limit: 3 })).map((i) => i.key)).toEqual([`${p}n5`, `${p}n4`, `${p}n3`]);
    for (const lease of leases) await lease.release();
  }, 60_000);
});

describe('list(): bad input fails before any backend call, naming the field', () => {
  let app: LockApp;
  beforeAll(async () => {
    app = await startLockApp({ memory: true });
  });
  afterAll(() => app.close());

  it.each([
    ['limit 0', { limit: 0 }, 'limit'],
    ['limit 1.5', { limit: 1.5 }, 'limit'],
    ['limit 10,001', { limit: 10_001 }, 'limit'],
    ['limit NaN', { limit: Number.NaN }, 'limit'],
    ["limit '5'", { limit: '5' }, 'limit'],
    ['prefix 5', { prefix: 5 }, 'prefix'],
    ['a prefix with a lone surrogate', { prefix: 'x\uD800' }, 'prefix'],
    ['a prefix longer than any key', { prefix: 'x'.repeat(100_000) }, 'prefix'],
    ['an unknown field', { pattern: '*' }, 'pattern'],
  ])('%s → %s', async (_label, options, field) => {
    const error = await app.locks.list({ purpose: 'efficiency' }, options as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe(field);
  });

  it('an unknown backend is refused naming the backend', async () => {
    const error = await app.locks.list({ backend: 'nope' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('backend');
  });
});

describe('list() on Redis', () => {
  it('reads with SCAN, never KEYS (KEYS blocks the server while it walks every key)', async () => {
    const admin = new Redis(redisUrl());
    const app = await startLockApp({ redis: { url: redisUrl() } });
    try {
      const p = uniqueKey('list-scan');
      const lease = await app.locks.acquire(p, { purpose: 'efficiency', ttl: 10_000 });
      const calls = async (command: string): Promise<number> => Number(/calls=(\d+)/.exec(String(await admin.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${command}:`)) ?? '')?.[1] ?? 0);
      const [keysBefore, scanBefore] = [await calls('keys'), await calls('scan')];
      expect((await app.locks.list({ backend: 'redis' }, { prefix: p })).map((i) => i.key)).toEqual([p]);
      expect(await calls('keys')).toBe(keysBefore);
      expect(await calls('scan')).toBeGreaterThan(scanBefore);
      await lease.release();
    } finally {
      await app.close();
      admin.disconnect();
    }
  }, 30_000);

  it('a server that stops answering fails the call in bounded time (LockBackendUnavailableError), it does not hang', async () => {
    const url = new URL(redisUrl());
    const proxy = await TcpProxy.start(Number(url.port), url.hostname);
    const app = await startLockApp({ redis: { url: `redis://${proxy.endpoint}`, commandTimeoutMs: 500 } });
    try {
      await app.locks.list({ backend: 'redis' }, { prefix: 'x' });
      proxy.blackhole();
      const started = Date.now();
      await expect(app.locks.list({ backend: 'redis' }, { prefix: 'x' })).rejects.toBeInstanceOf(LockBackendUnavailableError);
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await app.close();
      await proxy.close();
    }
  }, 30_000);
});
