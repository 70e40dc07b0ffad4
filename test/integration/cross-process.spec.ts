import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, untilQueued, type LockApp } from '../harness/lock-app.js';
import { LockWorker } from '../harness/worker.js';

// Another process on the same server: a worker forked with the case's own module options, so the
// worker names no backend and a new backend reaches it with no edit. Every backend another process
// can reach (not the in-process memory backend; a Redis Cluster's options carry client objects,
// which do not cross a process boundary, and its cross-process behaviour is Redis's).
// Not the cases whose options carry the application's client (a Cluster, node-redis, iovalkey): options go to the other process as JSON.
const CASES = backendCases((c) => !c.inProcess && !c.cluster && c.client === undefined);

describe.each(CASES)('$name: locks across processes', (c) => {
  let server: BackendServer;
  let app: LockApp;
  const workers: LockWorker[] = [];
  const worker = async (): Promise<LockWorker> => {
    const started = await LockWorker.start({ options: server.options });
    workers.push(started);
    return started;
  };

  beforeAll(async () => {
    server = await c.server();
    app = await startLockApp(server.options);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.kill9()));
    await app?.close();
    await server?.stop();
  });

  it('a key another process holds is busy here; a waiter here gets it at that release, with a larger token where the backend fences', async () => {
    const key = uniqueKey(`xproc-${c.name}`);
    const other = await worker();
    other.send({ op: 'acquire', key, ttl: 10_000, wait: 0, purpose: c.purpose });
    const held = await other.next('acquired');
    expect(await app.locks.tryAcquire(key, { purpose: c.purpose })).toBeNull();
    const waiting = app.locks.acquire(key, { purpose: c.purpose, ttl: 5_000, wait: 8_000 });
    if (c.queues) await untilQueued(app.locks, key, { purpose: c.purpose }, 1);
    other.send({ op: 'release' });
    await other.next('released');
    const mine = await waiting;
    expect(mine.backend).toBe(c.backend);
    if (c.fencing) expect(mine.token!).toBeGreaterThan(BigInt(held.token!));
    await mine.release();
  }, 30_000);

  it('a key held here is busy for another process: its single try fails with LockBusyError, and succeeds once this one releases', async () => {
    const key = uniqueKey(`xproc-back-${c.name}`);
    const other = await worker();
    const mine = await app.locks.acquire(key, { purpose: c.purpose, ttl: 10_000 });
    other.send({ op: 'acquire', key, ttl: 5_000, wait: 0, purpose: c.purpose });
    expect(await other.next('error')).toMatchObject({ name: 'LockBusyError' });
    await mine.release();
    other.send({ op: 'acquire', key, ttl: 5_000, wait: 0, purpose: c.purpose });
    const theirs = await other.next('acquired');
    if (c.fencing) expect(BigInt(theirs.token!)).toBeGreaterThan(mine.token!);
    other.send({ op: 'release' });
    await other.next('released');
  }, 30_000);
});
