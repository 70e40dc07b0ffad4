import { LeaseLostError } from '../../lib/index.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { backendsOf } from '../harness/backends-of.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

// inspect() and forceRelease() against real servers, one case per backend: three application
// instances — a holder, a waiter, an operator — share the server and nothing else.

const CASES = backendCases((c) => !c.cluster);

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${withinMs} ms`);
    await sleep(10);
  }
}

describe('forceRelease() on etcd: a holder farther from etcd than the operator (adversarial review)', () => {
  it("is told: its process watches the markers from its grant's revision, not from when the watch was set up", async () => {
    const [host, port] = etcdHosts()[0].split(':');
    const proxy = await TcpProxy.start(Number(port), host);
    proxy.delay(40);
    const far = await startLockApp({ etcd: { hosts: [proxy.endpoint] } });
    const near = await startLockApp({ etcd: { hosts: etcdHosts() } });
    try {
      for (let round = 0; round < 3; round++) {
        const key = uniqueKey('force-far');
        const held = await far.locks.acquire(key, { purpose: 'correctness', ttl: 20_000 });
        expect(await near.locks.forceRelease(key, { backend: 'etcd' })).toBe(true);
        await eventually(() => held.signal.aborted, 3_000);
        expect((held.signal.reason as LeaseLostError).reason).toBe('force-released');
        await sleep(1_200); // the watch ends a second after the last lease: the next grant starts it again
      }
    } finally {
      await far.close();
      await near.close();
      await proxy.close();
    }
  }, 60_000);
});

describe.each(CASES)('inspect() and forceRelease() on $name', ({ backend, server, purpose, fencing, queues, lossNotice, handsOff, readWrite }) => {
  const apps: LockApp[] = [];
  let running: BackendServer;
  const start = async (): Promise<LockApp> => {
    const app = await startLockApp(running.options);
    apps.push(app);
    return app;
  };
  beforeAll(async () => {
    running = await server();
  }, 60_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await running?.stop();
  });

  it("shows the holder's hold; a forced release tells the holder at once, lets the waiter in, and leaves the new holder's key alone", async () => {
    const [a, b, operator] = await Promise.all([start(), start(), start()]);
    const target = { backend };
    const key = uniqueKey(`force-${backend}`);
    expect(await operator.locks.inspect(key, target)).toBeNull();
    expect(await operator.locks.forceRelease(key, target)).toBe(false);

    const stuck = await a.locks.acquire(key, { purpose, ttl: 20_000 });
    const waiting = b.locks.acquire(key, { purpose, ttl: 20_000, wait: 10_000 });
    if (queues) await eventually(async () => (await operator.locks.inspect(key, { purpose }))?.waiters === 1, 5_000);
    const info = await operator.locks.inspect(key, { purpose });
    // The memory backend is the server itself: it knows, and says, how long the key has been held.
    const { heldForMs, ...seen } = info!;
    expect(seen).toEqual({ key, backend, remainingMs: expect.any(Number), waiters: queues ? 1 : 0, ...(fencing ? { token: stuck.token } : {}), ...(readWrite ? { mode: 'write' } : {}) });
    if (backend === 'shared') expect(heldForMs).toBeGreaterThanOrEqual(0);
    else expect(heldForMs).toBeUndefined();
    // etcd, ZooKeeper: the holder's session (renewed while its process lives); the others: the ttl.
    expect(info!.remainingMs).toBeGreaterThan(backend === 'etcd' || backend === 'zookeeper' ? 1_000 : 15_000);
    expect(info!.remainingMs).toBeLessThanOrEqual(20_000);
    // The holder's own process shows its token on every fencing backend.
    if (fencing) expect((await a.locks.inspect(key, { purpose }))?.token).toBe(stuck.token);

    expect(await operator.locks.forceRelease(key, target)).toBe(true);
    const next = await waiting;
    if (lossNotice === 'message') {
      // Another process's holder hears of it through the backend, long before its 20 s ran out.
      await eventually(() => stuck.signal.aborted, 2_000);
    } else {
      // No message reaches it: its next renewal finds a majority without its key.
      expect(stuck.signal.aborted).toBe(false);
      await expect(stuck.extend(20_000)).rejects.toBeInstanceOf(LeaseLostError);
    }
    expect(stuck.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((stuck.signal.reason as LeaseLostError).reason).toBe(lossNotice === 'message' ? 'force-released' : 'not-owner');
    expect(stuck.remainingMs()).toBe(0);
    if (fencing) expect(next.token! > stuck.token!).toBe(true);
    expect(next.signal.aborted).toBe(false);

    await stuck.release(); // owner-checked: the new holder keeps its key
    const after = await operator.locks.inspect(key, target);
    expect(after).not.toBeNull();
    if (fencing) expect((await b.locks.inspect(key, target))?.token).toBe(next.token);
    await next.release();
    expect(await operator.locks.inspect(key, target)).toBeNull();
  }, 30_000);

  if (lossNotice === 'message') {
    it("a process's first grant is told too, even when the release is forced at once (adversarial review)", async () => {
      // Pub/sub keeps nothing for a subscriber still connecting (Redis): the first grant of a fresh
      // process waits for its subscription, then checks the key is still its own.
      for (let round = 0; round < 3; round++) {
        const [holderApp, operator, next] = await Promise.all([start(), start(), start()]);
        const key = uniqueKey(`force-first-${backend}`);
        const held = await holderApp.locks.acquire(key, { purpose, ttl: 20_000 });
        expect(await operator.locks.forceRelease(key, { backend })).toBe(true);
        const taken = await next.locks.acquire(key, { purpose, ttl: 20_000, wait: 5_000 });
        await eventually(() => held.signal.aborted, 2_000);
        await taken.release();
        await Promise.all([holderApp.close(), operator.close(), next.close()]);
      }
    }, 60_000);
  }

  // Only where a release hands the key on by message (the others have no such in-between state).
  if (!handsOff) return;
  it('a hand-off the forced holder had not started on yet is void: it never becomes a second holder', async () => {
    // B was handed the key by a release (the message is in B's process) but has not started on it
    // when the operator forces the release: the key goes on to C, and B must not start on it.
    const [a, b, c, operator] = await Promise.all([start(), start(), start(), start()]);
    const key = uniqueKey(`force-handoff-${backend}`);
    const [backendB, backendC] = [backendsOf(b.app).get(backend)!, backendsOf(c.app).get(backend)!];
    const waitersOf = (app: LockApp): { hasHandOff(owner: string): boolean } => (backendsOf(app.app).get(backend) as unknown as { waiters: { hasHandOff(owner: string): boolean } }).waiters;
    const [ownerB, ownerC] = [uniqueKey('owner-b').replaceAll(':', '-'), uniqueKey('owner-c').replaceAll(':', '-')];
    const held = await a.locks.acquire(key, { purpose, ttl: 20_000 });
    expect((await backendB.acquire({ key, owner: ownerB, ttlMs: 20_000, queue: true })).acquired).toBe(false);
    expect((await backendC.acquire({ key, owner: ownerC, ttlMs: 20_000, queue: true })).acquired).toBe(false);
    await held.release();
    await eventually(() => waitersOf(b).hasHandOff(ownerB), 2_000);
    expect(await operator.locks.forceRelease(key, { backend })).toBe(true);
    // C's hand-off and then the '!lost' of B are published by the one forced release, in that order.
    await eventually(() => waitersOf(c).hasHandOff(ownerC), 2_000);
    // B has heard its '!lost': the hand-off it had not started on is revoked.
    await eventually(() => !waitersOf(b).hasHandOff(ownerB), 10_000);
    expect((await backendB.acquire({ key, owner: ownerB, ttlMs: 20_000, queue: true })).acquired).toBe(false);
    expect((await backendC.acquire({ key, owner: ownerC, ttlMs: 20_000, queue: true })).acquired).toBe(true);
    await backendB.release(key, ownerB);
    await backendC.release(key, ownerC);
    expect(await operator.locks.inspect(key, { backend })).toBeNull();
  }, 30_000);
});
