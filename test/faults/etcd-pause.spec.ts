import { Etcd3 } from 'etcd3';
import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { LockWorker } from '../harness/worker.js';

describe('etcd: a holder process paused (SIGSTOP) past its session ttl', () => {
  let app: LockApp;
  let raw: Etcd3;
  let worker: LockWorker | undefined;

  beforeAll(async () => {
    app = await startLockApp({ etcd: { hosts: etcdHosts() } });
    raw = new Etcd3({ hosts: etcdHosts() });
  });
  afterAll(async () => {
    await worker?.kill9();
    await app.close();
    raw.close();
  });

  it('loses the key on the server, a new holder gets a larger token, and the paused holder learns right after SIGCONT', async () => {
    const key = uniqueKey('gc-pause');
    worker = await LockWorker.start({ etcdHosts: etcdHosts(), sessionTtlSeconds: 2 });
    // The lock's own ttl is long: only the session lease can end it while the process is frozen.
    worker.send({ op: 'acquire', key, ttl: 60_000, wait: 0, purpose: 'correctness' });
    const acquired = await worker.next('acquired');
    const pausedToken = BigInt(acquired.token!);

    worker.pause();
    const pausedAt = Date.now();
    const lease = await app.locks.acquire(key, { purpose: 'correctness', ttl: 10_000, wait: 15_000 });
    const takenOverAfter = Date.now() - pausedAt;
    expect(lease.token!).toBeGreaterThan(pausedToken);
    // The session lease (2 s) expired on the server; the 60 s lock ttl did not matter.
    expect(takenOverAfter).toBeLessThan(10_000);
    const keys = await raw.getAll().prefix(`lock/${encodeURIComponent(key)}/`).keys();
    expect(keys).toHaveLength(1); // only the new holder's

    await sleep(3_000 - takenOverAfter > 0 ? 3_000 - takenOverAfter : 0); // paused ≥ 3 s in all
    const resumedAt = Date.now();
    worker.resume();
    const lost = await worker.next('lost', 5_000);
    expect(lost.reason).toBe('session-lost');
    expect(lost.at - resumedAt).toBeLessThan(1_000);
    await lease.release();
  });
});
