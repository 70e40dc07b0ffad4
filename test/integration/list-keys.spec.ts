import { createServer } from 'node:net';
import { withPermits } from '../../lib/backends/semaphore.util.js';
import { Redis } from 'ioredis';
import zookeeper from 'node-zookeeper-client';
import { LockBackendUnavailableError, RedlockBackend, ZooKeeperBackend, type Lease } from '../../lib/index.js';
import type { LockBackend } from '../../lib/backends/lock-backend.interface.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { backendsOf } from '../harness/backends-of.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

/** A case that does not apply to a backend (no ttl, no semaphores, no queue) is not registered, rather than reported skipped. */
const when = (applies: boolean): typeof it => (applies ? it : ((() => undefined) as unknown as typeof it));

// LockBackend.listKeys() against real servers, one case per backend: what a user of list() would
// notice — a held key missing, a free one shown, a name changed on the way, a prefix that matches
// too much, more names than asked for.

// Every backend whose server is the spec's own (a listing of '' shows only what it holds), every topology.
const CASES = backendCases((c) => c.ownServer);

/** Names that an encoding, a LIKE pattern, a path or a hash tag could change or confuse. */
const ODD = ['{a}', '}x', '%', '100%_off', 'a/b/c', 'a.b', 'with space', '🔑 ключ', `"q'uote`, '<img src=x onerror=alert(1)>', 'back\\slash', '%7D%25'];
/** Whole keys (no namespace): a path's `.`/`..`, Redis's encoded layout (a key starting with `}`). */
const BARE = ['.', '..', '}', '}{x}', '%2E'];

const sorted = (names: readonly string[]): string[] => [...names].sort();

describe.each(CASES)('listKeys on $name', (c) => {
  let server: BackendServer;
  let holder: LockApp;
  let other: LockApp;
  const leases: Lease[] = [];
  const backend = (): LockBackend => backendsOf(holder.app).get(c.backend)!;
  const list = (prefix: string, max = 1_000): Promise<string[]> => backend().listKeys!(prefix, max);
  const hold = async (key: string, permits?: number): Promise<Lease> => {
    const lease = await holder.locks.acquire(key, { purpose: c.purpose, ttl: 30_000, wait: 0, permits });
    leases.push(lease);
    return lease;
  };

  beforeAll(async () => {
    server = await c.server();
    [holder, other] = await Promise.all([startLockApp(server.options), startLockApp(server.options)]);
  }, 90_000);
  afterEach(async () => {
    for (const lease of leases.splice(0)) await lease.release().catch(() => undefined);
  });
  afterAll(async () => {
    await holder?.close();
    await other?.close();
    await server?.stop();
  });

  it('lists every held key by its exact name, once, and no longer once released', async () => {
    const ns = `${uniqueKey('odd')}/`;
    const keys = [...ODD.map((k) => ns + k), ...BARE];
    const held = new Map<string, Lease>();
    for (const key of keys) held.set(key, await hold(key));
    // The first case of the server: nothing else is held.
    const all = await list('');
    expect(all).toHaveLength(new Set(all).size);
    expect(sorted(all)).toEqual(sorted(keys));
    expect(sorted(await list(ns))).toEqual(sorted(keys.filter((k) => k.startsWith(ns))));

    const released = keys.filter((_, i) => i % 2 === 0);
    for (const key of released) await held.get(key)!.release();
    expect(sorted(await list(''))).toEqual(sorted(keys.filter((k) => !released.includes(k))));
    for (const key of keys) await held.get(key)!.release();
    // ZooKeeper: the lines' parent znodes are still there, empty.
    expect(await list('')).toEqual([]);
  }, 60_000);

  it('does not list a force-released key', async () => {
    const ns = `${uniqueKey('forced')}/`;
    await hold(`${ns}kept`);
    await hold(`${ns}forced`);
    expect(sorted(await list(ns))).toEqual([`${ns}forced`, `${ns}kept`]);
    expect(await other.locks.forceRelease(`${ns}forced`, { backend: c.backend })).toBe(true);
    expect(await list(ns)).toEqual([`${ns}kept`]);
  }, 30_000);

  when(c.expires)('does not list a key whose holder stopped renewing once its ttl has run out', async () => {
    const key = uniqueKey('expired');
    // A holder that died right after its grant: nobody renews or releases.
    expect((await backend().acquire({ key, owner: 'dead-owner', ttlMs: 400, queue: false })).acquired).toBe(true);
    expect(await list(key)).toEqual([key]);
    await sleep(700);
    expect(await list(key)).toEqual([]);
  }, 30_000);

  when(c.semaphores)('lists a semaphore key once, whatever its holders, and no longer once they are gone', async () => {
    const ns = `${uniqueKey('sem')}/`;
    const first = await hold(`${ns}sem`, 3);
    const second = await hold(`${ns}sem`, 3);
    await hold(`${ns}plain`);
    expect(sorted(await list(ns))).toEqual([`${ns}plain`, `${ns}sem`]);
    await first.release();
    expect(sorted(await list(ns))).toEqual([`${ns}plain`, `${ns}sem`]);
    await second.release();
    expect(await list(ns)).toEqual([`${ns}plain`]);
  }, 30_000);

  when(c.queues)('lists a key with waiters once, and not when only waiters are left', async () => {
    const ns = `${uniqueKey('waited')}/`;
    const lease = await hold(`${ns}k`);
    const waiting = [0, 1].map(() => other.locks.acquire(`${ns}k`, { purpose: c.purpose, ttl: 30_000, wait: 20_000 }));
    const deadline = Date.now() + 10_000;
    while ((await holder.locks.inspect(`${ns}k`, { backend: c.backend }))?.waiters !== 2 && Date.now() < deadline) await sleep(50);
    expect(await list(ns)).toEqual([`${ns}k`]);
    await lease.release();
    const first = await Promise.race(waiting.map((w, i) => w.then(() => i)));
    for (const i of [first, 1 - first]) {
      const next = await waiting[i];
      expect(await list(ns)).toEqual([`${ns}k`]);
      await next.release();
    }
    expect(await list(ns)).toEqual([]);

    if (c.backend !== 'postgres') return; // ZooKeeper: a waiter's znode always waits behind a holder's
    // A holder that died while others wait: its row expired, the waiters' entries still live (for
    // three waiter heartbeats, 1.5 s, from their last request).
    const plain = `${ns}plain`;
    expect((await backend().acquire({ key: plain, owner: 'dead-holder', ttlMs: 300, queue: false })).acquired).toBe(true);
    expect((await backend().acquire({ key: plain, owner: 'waiter', ttlMs: 30_000, queue: true })).acquired).toBe(false);
    // A semaphore whose holders died: its mark lives on for its waiter alone.
    const sem = `${ns}sem`;
    const view = withPermits(backend(), 2);
    for (const owner of ['dead-1', 'dead-2']) expect((await view.acquire({ key: sem, owner, ttlMs: 300, queue: false })).acquired).toBe(true);
    expect((await view.acquire({ key: sem, owner: 'sem-waiter', ttlMs: 30_000, queue: true })).acquired).toBe(false);
    expect(sorted(await list(ns))).toEqual([plain, sem]);
    await sleep(500);
    expect(await list(ns)).toEqual([]);
    await backend().release(plain, 'waiter');
    await view.release(sem, 'sem-waiter');
  }, 60_000);

  it('filters on the name as the user wrote it: no wildcards, no encoded forms, a prefix of a name is no match for a longer prefix', async () => {
    const ns = `${uniqueKey('prefix')}/`;
    const names = ['a', 'ab', 'a/b', 'a%_x', 'aZx', 'a\\x', '.x', '%2E', 'b'];
    for (const name of names) await hold(ns + name);
    const under = async (prefix: string): Promise<string[]> => sorted((await list(ns + prefix)).map((k) => k.slice(ns.length)));
    expect(await under('')).toEqual(sorted(names));
    expect(await under('a')).toEqual(sorted(['a', 'ab', 'a/b', 'a%_x', 'aZx', 'a\\x']));
    expect(await under('ab')).toEqual(['ab']);
    expect(await under('a/')).toEqual(['a/b']);
    expect(await under('a%')).toEqual(['a%_x']);
    expect(await under('a%_')).toEqual(['a%_x']);
    expect(await under('a_')).toEqual([]);
    expect(await under('a\\')).toEqual(['a\\x']);
    expect(await under('.')).toEqual(['.x']);
    expect(await under('%2E')).toEqual(['%2E']);
    expect(await under('c')).toEqual([]);
    // A prefix shorter than the namespace, ending inside it.
    expect(sorted(await list(ns.slice(0, -3)))).toEqual(sorted(names.map((n) => ns + n)));
  }, 30_000);

  it('lists at most `max` names, each a held key', async () => {
    const ns = `${uniqueKey('max')}/`;
    const keys = Array.from({ length: 7 }, (_, i) => `${ns}k${i}`);
    for (const key of keys) await hold(key);
    for (const max of [1, 3, 6]) {
      const some = await list(ns, max);
      expect(some).toHaveLength(max);
      expect(new Set(some).size).toBe(max);
      for (const key of some) expect(keys).toContain(key);
    }
    expect(sorted(await list(ns, 7))).toEqual(keys);
    expect(sorted(await list(ns, 100))).toEqual(keys);
  }, 30_000);

  when(c.backend === 'zookeeper')('lists a key once beside znodes it did not name (another spelling of its name, a stray), and not those', async () => {
    const key = `${uniqueKey('stray')}.x`;
    await hold(key);
    const parent = (backend() as ZooKeeperBackend).parentOf(key);
    const root = parent.slice(0, parent.lastIndexOf('/'));
    const client = zookeeper.createClient(server.options.zookeeper!.connectionString, { sessionTimeout: 4_000 });
    client.connect();
    await new Promise((resolve) => client.once('connected', resolve));
    const call = (fn: (cb: (error: Error | null) => void) => void): Promise<void> =>
      new Promise((resolve, reject) => fn((error) => (error ? reject(error) : resolve())));
    // Lines somebody is in (a child each): the key's name with a lower-case escape, and a name no key encodes to.
    const strays = [parent.replace('%2E', '%2e'), `${root}/%zz`];
    try {
      for (const path of strays) {
        await call((cb) => client.create(path, cb));
        await call((cb) => client.create(`${path}/child`, cb));
      }
      expect(await list(key.slice(0, 5))).toEqual([key]);
    } finally {
      for (const path of strays) for (const p of [`${path}/child`, path]) await call((cb) => client.remove(p, -1, cb)).catch(() => undefined);
      client.close();
    }
  }, 30_000);

  if (c.backend !== 'redlock') return;

  it('lists a key a majority of masters hold, not one only a minority holds', async () => {
    const urls = server.options.redlock!.urls!;
    const masters = urls.map((url) => new Redis(url));
    const ns = `${uniqueKey('minority')}/`;
    try {
      // Keys another process set and never gave back on the other masters (a lost majority).
      await masters[0].set(`lock:{${ns}one}`, 'someone.0', 'PX', 30_000);
      for (const m of masters.slice(0, 2)) await m.set(`lock:{${ns}two}`, 'someone.1', 'PX', 30_000);
      await hold(`${ns}all`);
      expect(sorted(await list(ns))).toEqual([`${ns}all`, `${ns}two`]);
    } finally {
      for (const m of masters) m.disconnect();
    }
  }, 30_000);

  it('refuses to answer when fewer than a majority of masters answer', async () => {
    const closedPort = async (): Promise<number> => {
      const probe = createServer();
      await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
      const { port } = probe.address() as { port: number };
      await new Promise((resolve) => probe.close(resolve));
      return port;
    };
    const clients = [new Redis(server.options.redlock!.urls![0])];
    for (let i = 0; i < 2; i++) clients.push(new Redis({ host: '127.0.0.1', port: await closedPort(), maxRetriesPerRequest: 1 }));
    for (const client of clients) client.on('error', () => undefined);
    const lonely = new RedlockBackend({ clients, ownsClients: true, nodeTimeoutMs: 200 });
    try {
      await hold(uniqueKey('lonely'));
      await expect(lonely.listKeys('', 10)).rejects.toThrow(LockBackendUnavailableError);
      await expect(lonely.listKeys('', 10)).rejects.toThrow(/1 of 3 masters answered, 2 are needed/);
    } finally {
      await lonely.close();
      // ioredis's disconnect() of a client that never connected keeps a 2 s timer: let it end here.
      await sleep(2_100);
    }
  }, 30_000);
});
