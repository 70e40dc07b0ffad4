import { Etcd3 } from 'etcd3';
import { EtcdFence, InvalidLockOptionsError } from '../../lib/index.js';
import { etcdHosts, uniqueKey } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

// A fence call into a partition must end: a pending gRPC call would also keep the process alive.
describe('EtcdFence: every call is bounded by timeoutMs', () => {
  it('a write into a silent network fails within its timeout instead of hanging', async () => {
    const proxy = await TcpProxy.start(Number(etcdHosts()[0].split(':').pop()));
    const etcd = new Etcd3({ hosts: proxy.endpoint });
    try {
      const fence = new EtcdFence(etcd, { timeoutMs: 500 });
      const key = uniqueKey('fence-timeout');
      await fence.write(key, 'v1', 5n); // connected, healthy
      proxy.blackhole();
      const started = performance.now();
      // The 8 s "still pending" timer is cleared once the race is decided: left running, it kept
      // the jest worker alive after the last file ("a worker process has failed to exit gracefully").
      let pending: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        fence.write(key, 'v2', 6n).then(
          () => 'written',
          (error: Error) => `failed: ${error.name}`,
        ),
        new Promise<string>((resolve) => (pending = setTimeout(() => resolve('still pending'), 8_000))),
      ]).finally(() => clearTimeout(pending));
      expect(outcome).toMatch(/^failed/);
      // Measured ≈ 0.5 s; generous bound for etcd3's own retry of an expired call.
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      proxy.heal();
      etcd.close();
      await proxy.close();
    }
  }, 20_000);

  it.each([0, -1, 1.5, Number.NaN, Infinity, 2 ** 31, '100'])('timeoutMs %p is refused, naming the field', (timeoutMs) => {
    const etcd = new Etcd3({ hosts: etcdHosts() });
    try {
      expect(() => new EtcdFence(etcd, { timeoutMs: timeoutMs as number })).toThrow(InvalidLockOptionsError);
      expect(() => new EtcdFence(etcd, { timeoutMs: timeoutMs as number })).toThrow(/timeoutMs/);
    } finally {
      etcd.close();
    }
  });
});
