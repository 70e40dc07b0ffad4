import { Etcd3 } from 'etcd3';
import { LockBackendUnavailableError } from '../../lib/index.js';
import { etcdHosts, startLockApp, uniqueKey } from '../harness/lock-app.js';
import { EtcdCluster, freePort } from '../harness/servers.mjs';

describe('etcd backend: clients, outages and shutdown', () => {
  it('leaves an application-owned Etcd3 client usable after app.close(), and its keys gone', async () => {
    const client = new Etcd3({ hosts: etcdHosts() });
    const { locks, close } = await startLockApp({ etcd: { client } });
    const key = uniqueKey('user-client');
    await locks.acquire(key, { purpose: 'correctness', ttl: 30_000 });
    expect(await client.getAll().prefix(`lock/${encodeURIComponent(key)}/`).keys()).toHaveLength(1);
    await close(); // releases the held lease on shutdown
    expect(await client.getAll().prefix(`lock/${encodeURIComponent(key)}/`).keys()).toHaveLength(0);
    await client.put('still-open').value('yes');
    expect(await client.get('still-open').string()).toBe('yes');
    client.close();
  });

  it('fails fast with LockBackendUnavailableError when etcd cannot be reached; the method does not run', async () => {
    const { locks, close } = await startLockApp({ etcd: { hosts: `127.0.0.1:${await freePort()}`, commandTimeoutMs: 500 } });
    try {
      let ran = false;
      const started = performance.now();
      const error = await locks
        .using(uniqueKey('down'), { purpose: 'correctness' }, () => {
          ran = true;
        })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockBackendUnavailableError);
      expect((error as Error).message).toMatch(/etcd.*unavailable/);
      expect(ran).toBe(false);
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      await close();
    }
  });

  it('works again after etcd comes back, with tokens still increasing', async () => {
    const cluster = await EtcdCluster.start({ size: 1 });
    const { locks, close } = await startLockApp({ etcd: { hosts: cluster.hosts, commandTimeoutMs: 500, sessionTtlSeconds: 2 } });
    try {
      const key = uniqueKey('restart');
      const first = await locks.acquire(key, { purpose: 'correctness', ttl: 10_000 });
      const lost = new Promise((resolve) => first.signal.addEventListener('abort', () => resolve(first.signal.reason)));
      await cluster.members[0].kill9();
      await expect(locks.acquire(uniqueKey('other'), { purpose: 'correctness', wait: 0 })).rejects.toBeInstanceOf(
        LockBackendUnavailableError,
      );
      // No keep-alive can succeed: the session (2 s) is presumed lost and the lease aborts.
      expect(await lost).toMatchObject({ reason: 'session-lost' });
      await cluster.members[0].restart();
      await cluster.waitHealthy();
      let second;
      for (let i = 0; i < 40 && !second; i++) {
        second = await locks.acquire(key, { purpose: 'correctness', wait: 0 }).catch(() => undefined);
        if (!second) await new Promise((r) => setTimeout(r, 250));
      }
      expect(second).toBeDefined();
      expect(second!.token!).toBeGreaterThan(first.token!);
      await second!.release();
    } finally {
      await close();
      await cluster.stop();
    }
  });
});
