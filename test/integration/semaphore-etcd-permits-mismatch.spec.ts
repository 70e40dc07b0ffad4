import { Etcd3 } from 'etcd3';
import { InvalidLockOptionsError } from '../../lib/index.js';
import { etcdHosts, startLockApp, uniqueKey, until } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

// Adversarial review: on etcd a mismatched queued caller (here permits 3 on a key held with
// permits 2, e.g. a replica of the next release during a rolling deploy) puts its entry before it
// reads and refuses itself. While that doomed entry is on the server (one round trip and a delete
// later — seconds for a far or slow process), a CORRECT caller (permits 2, a permit free) finds it
// in its window and is refused too, with InvalidLockOptionsError ("every caller of one key must
// agree on permits") although it agrees with every holder. Redis, PostgreSQL and memory check
// before they write (one atomic step): there it is admitted.

describe('etcd semaphore — a doomed mismatched entry refuses correct callers', () => {
  it('a caller agreeing with the holders is admitted while a mismatched caller is being refused', async () => {
    const [host, port] = etcdHosts()[0].split(':');
    const proxy = await TcpProxy.start(Number(port), host);
    const far = await startLockApp({ etcd: { hosts: [proxy.endpoint] } });
    const near = await startLockApp({ etcd: { hosts: etcdHosts() } });
    const key = uniqueKey('rv-sem-doomed');
    const opts = (permits: number, more: object = {}) => ({ purpose: 'correctness' as const, permits, ...more });
    const raw = new Etcd3({ hosts: etcdHosts() });
    try {
      // The far app's session first (so its acquire is one txn), then it hears etcd 400 ms late.
      await (await far.locks.acquire(uniqueKey('rv-warm'), opts(3, { ttl: 5_000 }))).release();
      const holder = await near.locks.acquire(key, opts(2, { ttl: 30_000 }));
      proxy.delay(400);
      const mismatched = far.locks.acquire(key, opts(3, { ttl: 30_000, wait: 5_000 })).then(
        () => 'admitted',
        (error: unknown) => (error instanceof InvalidLockOptionsError ? 'refused (permits)' : String(error)),
      );
      // Its entry is on the server now (beside the holder's, read directly); its refusal's delete,
      // another round trip through the 400 ms delay, is still to come.
      await until(async () => (await raw.getAll().prefix(`lock/${encodeURIComponent(key)}/`).keys()).length >= 2, 10_000, 'the mismatched entry on the server');
      const outcome = await near.locks.acquire(key, opts(2, { ttl: 30_000, wait: 3_000 })).then(
        async (lease) => {
          await lease.release();
          return 'admitted';
        },
        (error: unknown) => (error instanceof InvalidLockOptionsError ? 'refused (permits)' : String(error)),
      );
      expect({ mismatched: await mismatched, correct: outcome }).toEqual({ mismatched: 'refused (permits)', correct: 'admitted' });
      await holder.release();
    } finally {
      raw.close();
      proxy.heal();
      await far.close();
      await near.close();
      await proxy.close();
    }
  }, 60_000);
});
