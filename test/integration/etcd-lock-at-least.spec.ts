import { Etcd3 } from 'etcd3';
import { etcdHosts, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Issue 14: etcd's extend(ttlMs) cannot set a key's expiry — every key rides the process's shared
// session lease — while the engine's lockAtLeastFor release relies on extend() to keep the key
// "that long and no longer". On etcd the engine's delayed, owner-checked delete ends it instead:
// these specs watch the key itself on the server.

const AT_LEAST_MS = 1_500;
// How late past lockAtLeastFor the key may go: the delayed delete's timer and its round trip, and
// the spec's own polling. Not the promise (that is "at least", and "by the delete, not the session":
// the session would keep the key past the 5 s the spec polls). Measured under 3 extra CPU-bound
// processes: 19–56 ms after the grant; once 859 ms in a run of the whole second phase (3 workers, the CPU 80% busy)
// (counted from before the acquire, as it then was). Twice that, rounded up:
const LATE_MS = 1_800;

/** Poll `prefix` until no key is left; resolves with the time (performance.now()) it was first seen gone. */
async function goneAt(client: Etcd3, prefix: string, limitMs: number): Promise<number> {
  const until = performance.now() + limitMs;
  while (performance.now() < until) {
    const keys = await client.getAll().prefix(prefix).keys();
    const at = performance.now();
    if (keys.length === 0) return at;
    await sleep(20);
  }
  throw new Error(`${prefix} still has keys after ${limitMs} ms`);
}

describe('lockAtLeastFor on etcd (a shared session lease)', () => {
  let a: LockApp;
  let b: LockApp;
  let client: Etcd3;
  const lockPrefix = (key: string): string => `lock/${encodeURIComponent(key)}/`;

  beforeAll(async () => {
    a = await startLockApp({ etcd: { hosts: etcdHosts() } });
    b = await startLockApp({ etcd: { hosts: etcdHosts() } });
    client = new Etcd3({ hosts: etcdHosts() });
  });
  afterAll(async () => {
    await a.close();
    await b.close();
    client.close();
  });

  it('keeps the key for lockAtLeastFor after a fast release, then deletes it — and only it, not the session', async () => {
    const key = uniqueKey('at-least');
    const other = uniqueKey('at-least-neighbour');
    const neighbour = await a.locks.acquire(other, { purpose: 'correctness', ttl: 20_000 });
    const started = performance.now();
    let granted = Number.NaN;
    await a.locks.using(key, { purpose: 'correctness', ttl: 10_000, lockAtLeastFor: AT_LEAST_MS }, () => ((granted = performance.now()), sleep(10)));
    const released = performance.now();

    // Both keys ride one session lease: the delete below cannot be the session going away.
    const leaseOf = async (prefix: string): Promise<string> => (await client.getAll().prefix(prefix).exec()).kvs[0].lease;
    expect(await leaseOf(lockPrefix(key))).toBe(await leaseOf(lockPrefix(other)));

    const gone = await goneAt(client, lockPrefix(key), 5_000);
    // At least: counted from before the acquire (the lease's own start is later). No longer than the
    // delete's lateness: counted from the grant (the body's start), so a slow acquire is not counted.
    expect(gone - started).toBeGreaterThanOrEqual(AT_LEAST_MS);
    expect(gone - granted).toBeLessThan(AT_LEAST_MS + LATE_MS);
    expect(gone - released).toBeGreaterThan(AT_LEAST_MS - 300);
    // The neighbour's key, on the same session, is untouched.
    expect(await client.getAll().prefix(lockPrefix(other)).keys()).toHaveLength(1);
    await neighbour.release();
  });

  it('another process waiting on the key gets it when lockAtLeastFor has passed, not before', async () => {
    const key = uniqueKey('at-least-waiter');
    const started = performance.now();
    let granted = Number.NaN;
    await a.locks.using(key, { purpose: 'correctness', ttl: 10_000, lockAtLeastFor: AT_LEAST_MS }, () => ((granted = performance.now()), sleep(10)));
    expect(await b.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    const next = await b.locks.acquire(key, { purpose: 'correctness', wait: 5_000 });
    const at = performance.now();
    // Measured alone: 1,514–1,516 ms after the start.
    expect(at - started).toBeGreaterThanOrEqual(AT_LEAST_MS);
    expect(at - granted).toBeLessThan(AT_LEAST_MS + LATE_MS);
    await next.release();
  });
});
