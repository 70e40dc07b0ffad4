import { Etcd3 } from 'etcd3';
import zookeeper from 'node-zookeeper-client';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { backendsOf } from '../harness/backends-of.js';
import { acquireTxn } from '../../lib/backends/etcd/etcd-requests.util.js';
import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// A release on a fencing backend with waiters: the next waiter holds with a larger token, and
// every process's inspect() reports that token. etcd and ZooKeeper hand the lock over in the
// release's own write (the successor known at the holder's grant is written at the revision /
// zxid that deletes the holder's key); these are the cases where that successor is no longer the
// right one, or the releasing holder no longer holds. Four application instances share the server.

const CASES = backendCases((c) => c.fencing && c.queues);

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(10);
  }
}

describe.each(CASES)('a release with waiters on $name', ({ backend, server, purpose }) => {
  const apps: LockApp[] = [];
  let running: BackendServer;
  beforeAll(async () => {
    running = await server();
    for (let i = 0; i < 4; i++) apps.push(await startLockApp(running.options));
  }, 60_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await running?.stop();
  });

  const target = { backend };
  const waitersOn = async (key: string, count: number): Promise<void> =>
    eventually(async () => (await apps[3].locks.inspect(key, target))?.waiters === count, 5_000, `${count} waiter(s) on ${key}`);
  const tokenSeen = async (key: string): Promise<bigint | undefined> => (await apps[3].locks.inspect(key, target))?.token;

  it('goes from holder to waiter to waiter, each token larger, each shown by every process', async () => {
    const key = uniqueKey(`next-${backend}`);
    const first = await apps[0].locks.acquire(key, { purpose, ttl: 20_000 });
    const second = apps[1].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    await waitersOn(key, 1);
    const third = apps[2].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    await waitersOn(key, 2);
    await first.release();
    const b = await second;
    expect(b.token! > first.token!).toBe(true);
    expect(await tokenSeen(key)).toBe(b.token);
    await b.release();
    const c = await third;
    expect(c.token! > b.token!).toBe(true);
    expect(await tokenSeen(key)).toBe(c.token);
    await c.release();
    expect(await apps[3].locks.inspect(key, target)).toBeNull();
  }, 30_000);

  it('goes down a line of six in arrival order, each token larger and shown by every process', async () => {
    // Long enough that a hand-over passes on who follows (ZooKeeper writes the names behind the
    // successor on its znode): every hop after the first is granted without a read of the line.
    const key = uniqueKey(`next-line-${backend}`);
    const first = await apps[0].locks.acquire(key, { purpose, ttl: 20_000 });
    const line: Array<ReturnType<LockApp['locks']['acquire']>> = [];
    for (let i = 0; i < 5; i++) {
      line.push(apps[i % 3].locks.acquire(key, { purpose, ttl: 20_000, wait: 15_000 }));
      await waitersOn(key, i + 1);
    }
    let previous = first;
    await first.release();
    for (const next of line) {
      const held = await next;
      expect(held.token! > previous.token!).toBe(true);
      expect(await tokenSeen(key)).toBe(held.token);
      previous = held;
      await held.release();
    }
    expect(await apps[3].locks.inspect(key, target)).toBeNull();
  }, 30_000);

  it('skips a waiter that gave up after the holder was granted: the one behind it holds', async () => {
    const key = uniqueKey(`next-gone-${backend}`);
    const first = await apps[0].locks.acquire(key, { purpose, ttl: 20_000 });
    // The holder under test is granted as a waiter, with two more behind it.
    const holder = apps[1].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    await waitersOn(key, 1);
    const quitter = new AbortController();
    const givesUp = apps[2].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000, signal: quitter.signal }).catch((e: unknown) => e);
    await waitersOn(key, 2);
    const last = apps[0].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    await waitersOn(key, 3);
    await first.release();
    const held = await holder;
    await waitersOn(key, 2);
    quitter.abort(new Error('gave up'));
    expect(await givesUp).toEqual(new Error('gave up'));
    await waitersOn(key, 1);
    await held.release();
    const next = await last;
    expect(next.token! > held.token!).toBe(true);
    expect(await tokenSeen(key)).toBe(next.token);
    await next.release();
    expect(await apps[3].locks.inspect(key, target)).toBeNull();
  }, 30_000);

  it("a holder force-released before its release touches nothing of its successor's, now the holder", async () => {
    const key = uniqueKey(`next-forced-${backend}`);
    const first = await apps[0].locks.acquire(key, { purpose, ttl: 20_000 });
    const holder = apps[1].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    await waitersOn(key, 1);
    const successor = apps[2].locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    await waitersOn(key, 2);
    await first.release();
    const stale = await holder;
    expect(await apps[3].locks.forceRelease(key, target)).toBe(true);
    // Handed the lock by a release, it is told of its loss all the same (ZooKeeper: the watch of
    // its own znode is the one its wake-up read set).
    await eventually(() => stale.signal.aborted, 5_000, 'the force-released holder told of its loss');
    const now = await successor;
    expect(now.token! > stale.token!).toBe(true);
    expect(await tokenSeen(key)).toBe(now.token);
    // The forced holder's release is owner-checked, and its hand-over with it: the new holder's
    // key keeps the token it was granted (a fence keyed by it would otherwise refuse its writes).
    await stale.release();
    expect(await tokenSeen(key)).toBe(now.token);
    await now.extend(20_000);
    expect(now.signal.aborted).toBe(false);
    expect(await tokenSeen(key)).toBe(now.token);
    await now.release();
    expect(await apps[3].locks.inspect(key, target)).toBeNull();
  }, 30_000);
});

describe('a late copy of a waiter\'s queue txn on etcd', () => {
  it('does not write the key it holds by a hand-over again: its token stays the one inspect() shows', async () => {
    // etcd3 sends a request again when its answer was lost to a broken connection: a copy of the
    // waiter's queue txn can land after the waiter holds. Sent here by hand, with the waiter's key
    // and session lease, once it holds.
    const client = new Etcd3({ hosts: etcdHosts() });
    const apps = await Promise.all([0, 1, 2].map(() => startLockApp({ etcd: { hosts: etcdHosts() } })));
    try {
      const key = uniqueKey('next-late-copy');
      const first = await apps[0].locks.acquire(key, { purpose: 'correctness', ttl: 20_000 });
      const waiting = apps[1].locks.acquire(key, { purpose: 'correctness', ttl: 20_000, wait: 10_000 });
      await eventually(async () => (await apps[2].locks.inspect(key, { backend: 'etcd' }))?.waiters === 1, 5_000, 'one waiter');
      await first.release();
      const holder = await waiting;
      const line = `lock/${encodeURIComponent(key)}/`;
      const [held] = (await client.getAll().prefix(line).exec()).kvs;
      expect(BigInt(held.mod_revision)).toBe(holder.token);
      const copy = (await client.kv.txn(acquireTxn(line, held.key.toString(), held.lease, true) as never)) as { succeeded: boolean };
      expect(copy.succeeded).toBe(false);
      const [after] = (await client.getAll().prefix(line).exec()).kvs;
      expect({ mod: after.mod_revision, value: after.value.toString() }).toEqual({ mod: held.mod_revision, value: held.value.toString() });
      expect((await apps[2].locks.inspect(key, { backend: 'etcd' }))?.token).toBe(holder.token);
      await holder.release();
      expect(await apps[2].locks.inspect(key, { backend: 'etcd' })).toBeNull();
    } finally {
      await Promise.all(apps.map((app) => app.close()));
      client.close();
    }
  }, 30_000);
});

describe('a waiter\'s queue txn on etcd, sent again on a new session', () => {
  it('moves its key onto the new session lease: the old lease running out takes nothing of it', async () => {
    // An owner queued on a session it lost (keep-alives failed, the revoke unanswered) asks again
    // on a new one: its key must live on the lease it keeps alive now.
    const client = new Etcd3({ hosts: etcdHosts() });
    const app = await startLockApp({ etcd: { hosts: etcdHosts() } });
    try {
      const key = uniqueKey('next-new-session');
      const holder = await app.locks.acquire(key, { purpose: 'correctness', ttl: 20_000 });
      const line = `lock/${encodeURIComponent(key)}/`;
      const [old, fresh] = [client.lease(30, { autoKeepAlive: false }), client.lease(30, { autoKeepAlive: false })];
      const [oldId, freshId] = [await old.grant(), await fresh.grant()];
      const waiterKey = `${line}waiter-owner`;
      await client.kv.txn(acquireTxn(line, waiterKey, oldId, true) as never);
      await client.kv.txn(acquireTxn(line, waiterKey, freshId, true) as never);
      const [kv] = (await client.getAll().prefix(waiterKey).exec()).kvs;
      expect(kv.lease).toBe(freshId);
      await old.revoke();
      expect(await client.get(waiterKey).string()).not.toBeNull();
      await fresh.revoke();
      await holder.release();
    } finally {
      await app.close();
      client.close();
    }
  }, 30_000);
});

describe('a release with waiters on etcd, by a holder whose key vanished unseen', () => {
  it("hands nothing over: the new holder's key keeps its token", async () => {
    // The holder's key goes without its process hearing of it (as when its session lease ran out
    // while it was paused): it still believes it holds, and still knows the successor of its grant.
    const client = new Etcd3({ hosts: etcdHosts() });
    const apps = await Promise.all([0, 1, 2, 3].map(() => startLockApp({ etcd: { hosts: etcdHosts() } })));
    try {
      const key = uniqueKey('next-vanished');
      const inspectToken = async (): Promise<bigint | undefined> => (await apps[3].locks.inspect(key, { backend: 'etcd' }))?.token;
      const waiters = (count: number): Promise<void> =>
        eventually(async () => (await apps[3].locks.inspect(key, { backend: 'etcd' }))?.waiters === count, 5_000, `${count} waiter(s)`);
      const first = await apps[0].locks.acquire(key, { purpose: 'correctness', ttl: 20_000 });
      const holder = apps[1].locks.acquire(key, { purpose: 'correctness', ttl: 20_000, wait: 10_000 });
      await waiters(1);
      const successor = apps[2].locks.acquire(key, { purpose: 'correctness', ttl: 20_000, wait: 10_000 });
      await waiters(2);
      await first.release();
      const stale = await holder;
      const line = `lock/${encodeURIComponent(key)}/`;
      const keys = await client.getAll().prefix(line).sort('Create', 'Ascend').keys();
      expect(keys).toHaveLength(2);
      await client.delete().key(keys[0]);
      const now = await successor;
      expect(now.token! > stale.token!).toBe(true);
      expect(await inspectToken()).toBe(now.token);
      await stale.release().catch(() => undefined);
      expect(await inspectToken()).toBe(now.token);
      await now.release();
    } finally {
      await Promise.all(apps.map((app) => app.close()));
      client.close();
    }
  }, 30_000);
});

describe('a waiter on etcd released while its re-check is on the wire', () => {
  it('is not granted a key its own release deleted: a grant it reports is one inspect() shows', async () => {
    // The engine can give a place back (an abort, a multi-key lease let go) while the backend's
    // re-check is in flight. The re-check may find the lock handed over to that key — which the
    // release has deleted by the time the answer is read.
    const apps = await Promise.all([0, 1].map(() => startLockApp({ etcd: { hosts: etcdHosts() } })));
    try {
      const [a, b] = apps.map((app) => backendsOf(app.app).get('etcd')!);
      const key = uniqueKey('next-recheck-released');
      const request = (owner: string) => ({ key, owner, ttlMs: 20_000, queue: true });
      expect((await a.acquire(request('z'))).acquired).toBe(true);
      expect((await a.acquire(request('p'))).acquired).toBe(false);
      expect((await b.acquire(request('s'))).acquired).toBe(false);
      await a.release(key, 'z');
      // p's re-check: nobody ahead, granted as a waiter — it knows s is next, and hands over to it.
      expect((await a.acquire(request('p'))).acquired).toBe(true);
      await a.release(key, 'p');
      const rechecked = b.acquire(request('s'));
      const released = b.release(key, 's');
      const [result] = await Promise.all([rechecked, released]);
      // Our re-check starts over on a fresh key (the line is empty by then): that key is the grant.
      expect(result.acquired).toBe(true);
      expect((await a.inspect!(key))?.token).toBe(result.acquired ? result.token : 'not acquired');
      await b.release(key, 's');
      expect(await a.inspect!(key)).toBeNull();
    } finally {
      await Promise.all(apps.map((app) => app.close()));
    }
  }, 30_000);
});

/**
 * The application's own client for `backend`, whose answer to the first write recording a queued
 * owner's grant (etcd: the put on its own key, compared on its create revision; ZooKeeper: the
 * setData on its znode, empty or a semaphore's mark) is handed back only after `meanwhile()` has
 * run — as a release given while that write is on the wire, and answered first, would be.
 */
async function recordHeldBack(backend: string, options: BackendServer['options'], meanwhile: () => Promise<unknown>) {
  let armed = false;
  const run = async <T>(answer: T): Promise<T> => {
    await meanwhile();
    return answer;
  };
  if (backend === 'etcd') {
    const client = new Etcd3({ hosts: (options as { etcd: { hosts: string[] } }).etcd.hosts });
    const txn = client.kv.txn.bind(client.kv);
    client.kv.txn = ((request: { success?: Array<{ request_put?: { ignore_value?: boolean } }> }, ...rest: unknown[]) => {
      const answer = (txn as (...a: unknown[]) => Promise<unknown>)(request, ...rest);
      if (!armed || request.success?.[0]?.request_put?.ignore_value !== true) return answer;
      armed = false;
      return answer.then(run);
    }) as never;
    return { options: { etcd: { client } }, arm: () => (armed = true), close: async () => client.close() };
  }
  const client = zookeeper.createClient((options as { zookeeper: { connectionString: string } }).zookeeper.connectionString, { sessionTimeout: 4_000, spinDelay: 100 });
  client.connect();
  await new Promise((resolve) => client.once('connected', resolve));
  const setData = client.setData.bind(client) as (path: string, data: Buffer, version: number, cb: (...a: unknown[]) => void) => void;
  (client as unknown as { setData: typeof setData }).setData = (path, data, version, cb) => {
    if (!armed) return setData(path, data, version, cb);
    armed = false;
    setData(path, data, version, (...answer: unknown[]) => void run(answer).then(() => cb(...answer)));
  };
  return { options: { zookeeper: { client } }, arm: () => (armed = true), close: async () => client.close() };
}

const RECORDING = backendCases((c) => c.backend === 'etcd' || c.backend === 'zookeeper').flatMap((c) => [1, 2].map((permits) => ({ ...c, permits })));

describe.each(RECORDING)('a waiter on $name (permits $permits) released while the write recording its grant is on the wire', ({ backend, server, permits }) => {
  it('is not granted the entry its release deleted: what it reports holding is on the server, and nobody is admitted beside it', async () => {
    // First among the permits at its re-check, a waiter records its grant with one write; the
    // engine can give the place back (an abort, a multi-key lease let go) before that write's
    // answer is read.
    const running = await server();
    const key = uniqueKey(`record-released-${backend}-${permits}`);
    const request = (owner: string, queue = true) => ({ key, owner, ttlMs: 20_000, queue, ...(permits > 1 ? { permits } : {}) });
    let b: ReturnType<ReturnType<typeof backendsOf>['get']>;
    const own = await recordHeldBack(backend, running.options, () => b!.release(key, 's'));
    const apps = [await startLockApp(running.options), await startLockApp(own.options as never)];
    try {
      const a = backendsOf(apps[0].app).get(backend)!;
      b = backendsOf(apps[1].app).get(backend)!;
      const holders = Array.from({ length: permits }, (_, i) => `z${i}`);
      for (const z of holders) expect((await a.acquire(request(z))).acquired).toBe(true);
      expect((await b.acquire(request('s'))).acquired).toBe(false);
      await a.release(key, 'z0');
      own.arm();
      const result = await b.acquire(request('s'));
      // Our re-check starts over on a fresh entry (a permit is free by then): that entry is the grant.
      expect(result.acquired).toBe(true);
      if (permits === 1) expect((await a.inspect!(key))?.token).toBe(result.acquired ? result.token : 'not acquired');
      // Every permit is taken on the server, ours among them: a single try is turned away.
      expect((await a.acquire(request('t', false))).acquired).toBe(false);
      await b.release(key, 's');
      for (const z of holders.slice(1)) await a.release(key, z);
      expect(await a.inspect!(key)).toBeNull();
    } finally {
      for (const app of apps) await app.close();
      await own.close();
      await running.stop();
    }
  }, 60_000);
});
