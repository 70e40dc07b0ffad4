import type { Lease } from '../../lib/index.js';
import { etcdHosts, sleep, startLockApp, uniqueKey } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

// Adversarial review: etcd's forceRelease() of a semaphore key ends "the first `permits` entries"
// as one read sees them. A waiter that has just moved into that window (a permit was given back a
// moment ago) but has not yet learnt it (its process is farther from etcd than the operator) is
// not a holder — its engine holds no lease, nobody is told — yet its entry is deleted: it loses its
// place and starts over at the END of the queue, overtaken by every waiter that queued after it.
// Promised: forceRelease ends every holder; waiters are served in arrival order.

describe('review: etcd forceRelease() of a semaphore while a waiter moves into a permit', () => {
  it('the first waiter (farther from etcd) is still served before the waiters that queued after it', async () => {
    const [host, port] = etcdHosts()[0].split(':');
    const proxy = await TcpProxy.start(Number(port), host);
    const far = await startLockApp({ etcd: { hosts: [proxy.endpoint] } });
    const near = await startLockApp({ etcd: { hosts: etcdHosts() } });
    const operator = await startLockApp({ etcd: { hosts: etcdHosts() } });
    const opts = (more: object) => ({ purpose: 'correctness' as const, permits: 2, ...more });
    const target = { backend: 'etcd' };
    const waitFor = async (n: number): Promise<void> => {
      for (let j = 0; j < 300 && (await operator.locks.inspect(key, target))?.waiters !== n; j++) await sleep(20);
    };
    const key = uniqueKey('rv-sem-force-window');
    const leases: Lease[] = [];
    try {
      const h1 = await near.locks.acquire(key, opts({ ttl: 30_000 }));
      const h2 = await near.locks.acquire(key, opts({ ttl: 30_000 }));
      const order: string[] = [];
      const wait = (name: string, app: typeof far) =>
        app.locks.acquire(key, opts({ ttl: 30_000, wait: 25_000 })).then((lease) => {
          order.push(name);
          leases.push(lease);
          return lease;
        }, () => undefined);
      const w1 = wait('w1 (first, far)', far);
      await waitFor(1);
      const w2 = wait('w2', near);
      await waitFor(2);
      const w3 = wait('w3', near);
      await waitFor(3);
      // w1's process now hears etcd 300 ms late each way.
      proxy.delay(300);
      await h1.release(); // w1's entry is now among the first two: a permit is coming to it
      await sleep(50);
      const ended = await operator.locks.forceRelease(key, target);
      expect(ended).toBe(true);
      for (let j = 0; j < 250 && order.length < 2; j++) await sleep(20);
      expect(h2.signal.aborted).toBe(true);
      // In arrival order, the two permits go to w1 and w2; w3 waits.
      expect({ ended, admitted: order.slice(0, 2).sort() }).toEqual({ ended: true, admitted: ['w1 (first, far)', 'w2'] });
      void w1;
      void w2;
      void w3;
    } finally {
      proxy.heal();
      for (const lease of leases) await lease.release().catch(() => undefined);
      await sleep(200);
      for (const lease of leases) await lease.release().catch(() => undefined);
      await far.close();
      await near.close();
      await operator.close();
      await proxy.close();
    }
  }, 60_000);
});
