import { backendsOf } from '../harness/backends-of.js';
import { Etcd3 } from 'etcd3';
import { LeaseLostError, LockBusyError, type Lease } from '../../lib/index.js';
import { etcdHosts, sleep, startLockApp, uniqueKey, until, untilQueued, type LockApp } from '../harness/lock-app.js';

describe('etcd backend: fencing tokens and FIFO queueing', () => {
  let a: LockApp;
  let b: LockApp;
  let raw: Etcd3;

  beforeAll(async () => {
    a = await startLockApp({ etcd: { hosts: etcdHosts() } });
    b = await startLockApp({ etcd: { hosts: etcdHosts() } });
    raw = new Etcd3({ hosts: etcdHosts() });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    raw.close();
  });


  it('gives successive holders across two applications strictly increasing bigint tokens', async () => {
    const key = uniqueKey('tokens');
    const tokens: bigint[] = [];
    for (let i = 0; i < 6; i++) {
      const app = i % 2 === 0 ? a : b;
      await app.locks.using(key, { purpose: 'correctness', ttl: 5_000 }, (lease) => {
        expect(typeof lease.token).toBe('bigint');
        tokens.push(lease.token!);
      });
    }
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('tokens also increase across keys of one backend', async () => {
    const first = await a.locks.acquire(uniqueKey('k1'), { purpose: 'correctness' });
    await first.release();
    const second = await b.locks.acquire(uniqueKey('k2'), { purpose: 'correctness' });
    expect(second.token!).toBeGreaterThan(first.token!);
    await second.release();
  });

  it('a reentrant acquire in the same async context returns the same token', async () => {
    const key = uniqueKey('reentrant');
    await a.locks.using(key, { purpose: 'correctness' }, async (outer) => {
      const inner = await a.locks.acquire(key, { purpose: 'correctness', wait: 0 });
      expect(inner.reentrant).toBe(true);
      expect(inner.token).toBe(outer.token);
      await inner.release();
      expect(await b.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    });
  });

  it('excludes a second holder: tryAcquire null, acquire waits for the release', async () => {
    const key = uniqueKey('exclusive');
    const holder = await a.locks.acquire(key, { purpose: 'correctness', ttl: 10_000 });
    expect(await b.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    await expect(b.locks.acquire(key, { purpose: 'correctness', wait: 200 })).rejects.toBeInstanceOf(LockBusyError);
    const waiting = b.locks.acquire(key, { purpose: 'correctness', wait: 5_000 });
    // It waits in the queue when the holder lets go.
    await untilQueued(a.locks, key, { purpose: 'correctness' }, 1);
    const releasedAt = performance.now();
    await holder.release();
    const next = await waiting;
    expect(performance.now() - releasedAt).toBeLessThan(1_000); // woken by the watch, not the 5 s recheck
    expect(next.token!).toBeGreaterThan(holder.token!);
    await next.release();
  });

  it('serves 8 waiters in arrival order, and waiting writes nothing beyond one enqueue each (the grant is recorded when it comes)', async () => {
    const key = uniqueKey('fifo');
    const holder = await a.locks.acquire(key, { purpose: 'correctness', ttl: 30_000 });
    const order: number[] = [];
    const tokens: bigint[] = [];
    const waiters: Promise<void>[] = [];
    for (let i = 0; i < 8; i++) {
      const app = i % 2 === 0 ? b : a;
      waiters.push(
        app.locks.using(key, { purpose: 'correctness', wait: 20_000 }, (lease) => {
          order.push(i);
          tokens.push(lease.token!);
        }),
      );
      // Arrival order: each is in the queue before the next asks (inspect() reads, writes nothing).
      await untilQueued(a.locks, key, { purpose: 'correctness' }, i + 1);
    }
    // One put per waiter; nothing else while they wait (watch, not polling writes): the lock's keys
    // (read under its own prefix: other specs write to this etcd meanwhile) stay exactly as they were.
    const prefix = (backendsOf(a.app).get('etcd') as unknown as { lockPrefix(key: string): string }).lockPrefix(key);
    const lockKeys = async (): Promise<string[]> => {
      const start = Buffer.from(prefix);
      const end = Buffer.from(start);
      end[end.length - 1] += 1;
      const { kvs } = await raw.kv.range({ key: start, range_end: end });
      return kvs.map((kv: { key: Buffer; create_revision: string; mod_revision: string; version: string }) => `${kv.key.toString()} ${kv.create_revision} ${kv.mod_revision} ${kv.version}`);
    };
    const enqueued = await lockKeys();
    expect(enqueued).toHaveLength(9);
    for (const entry of enqueued) expect(entry.endsWith(' 1')).toBe(true); // each put once
    await sleep(600);
    expect(await lockKeys()).toEqual(enqueued);
    await holder.release();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('a waiter that times out or is aborted leaves the queue and the next one proceeds', async () => {
    const key = uniqueKey('cancel');
    const holder = await a.locks.acquire(key, { purpose: 'correctness', ttl: 30_000 });
    const controller = new AbortController();
    const aborted = b.locks.acquire(key, { purpose: 'correctness', wait: 20_000, signal: controller.signal });
    // Each in the queue before the next asks; the one with 300 ms may time out meanwhile.
    await untilQueued(a.locks, key, { purpose: 'correctness' }, 1);
    let timedOutSettled = false;
    const timedOut = a.locks.acquire(key, { purpose: 'correctness', wait: 300 });
    timedOut.then(
      () => (timedOutSettled = true),
      () => (timedOutSettled = true),
    );
    const queued = async (): Promise<number> => (await a.locks.inspect(key, { purpose: 'correctness' }))?.waiters ?? 0;
    await until(async () => timedOutSettled || (await queued()) >= 2, 10_000, 'the second waiter queued');
    const patient = b.locks.acquire(key, { purpose: 'correctness', wait: 20_000 });
    await until(async () => (await queued()) >= (timedOutSettled ? 2 : 3), 10_000, 'the patient waiter queued');
    controller.abort(new Error('caller gave up'));
    await expect(aborted).rejects.toThrow('caller gave up');
    await expect(timedOut).rejects.toBeInstanceOf(LockBusyError);
    const queueKeys = await raw.getAll().prefix(`lock/${encodeURIComponent(key)}/`).keys();
    expect(queueKeys).toHaveLength(2); // the holder and the patient waiter only
    await holder.release();
    const lease = await patient;
    expect(lease.token!).toBeGreaterThan(holder.token!);
    await lease.release();
    expect(await raw.getAll().prefix(`lock/${encodeURIComponent(key)}/`).keys()).toHaveLength(0);
  });

  it('honours the lock ttl although the session lease is shared: key deleted and signal aborted at expiry', async () => {
    const key = uniqueKey('ttl');
    const lease: Lease = await a.locks.acquire(key, { purpose: 'correctness', ttl: 400 });
    const reason = await new Promise<unknown>((resolve) => lease.signal.addEventListener('abort', () => resolve(lease.signal.reason)));
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect((reason as LeaseLostError).reason).toBe('expired');
    const next = await b.locks.acquire(key, { purpose: 'correctness', wait: 2_000 });
    expect(next.token!).toBeGreaterThan(lease.token!);
    await next.release();
  });

  it('keys that contain slashes do not share a queue with their prefixes', async () => {
    const parent = uniqueKey('tenant');
    const l1 = await a.locks.acquire(parent, { purpose: 'correctness' });
    const l2 = await b.locks.acquire(`${parent}/child`, { purpose: 'correctness', wait: 0 });
    await Promise.all([l1.release(), l2.release()]);
  });
});
