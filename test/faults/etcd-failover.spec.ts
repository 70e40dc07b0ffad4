import type { Lease } from '../../lib/index.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { EtcdCluster } from '../harness/servers.mjs';

describe('etcd: kill -9 of the leader of a 3-member cluster while locks change hands', () => {
  let cluster: EtcdCluster;
  let apps: LockApp[] = [];

  beforeAll(async () => {
    cluster = await EtcdCluster.start({ size: 3 });
    const etcd = { hosts: cluster.hosts, sessionTtlSeconds: 3, commandTimeoutMs: 1_500 };
    apps = await Promise.all([startLockApp({ etcd }), startLockApp({ etcd })]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await cluster.stop();
  });

  it('resumes after re-election; tokens never go backwards; no two unexpired leases overlap', async () => {
    const key = uniqueKey('failover');
    const started = Date.now();
    const runFor = 7_000;
    const entries: { at: number; token: bigint }[] = [];
    const inside = new Set<Lease>();
    let overlaps = 0;
    let errors = 0;

    const worker = async (app: LockApp): Promise<void> => {
      while (Date.now() - started < runFor) {
        try {
          await app.locks.using(key, { purpose: 'correctness', ttl: 2_000, wait: 3_000 }, async (lease) => {
            for (const other of inside) if (!other.signal.aborted) overlaps += 1;
            inside.add(lease);
            entries.push({ at: Date.now() - started, token: lease.token! });
            await sleep(15);
            inside.delete(lease);
          });
        } catch {
          errors += 1; // unavailable during the election, or busy past `wait`: try again
          await sleep(50);
        }
      }
    };
    const workers = [...apps, ...apps].map((app) => worker(app));

    await sleep(1_500);
    const leader = await cluster.leader();
    const killedAt = Date.now() - started;
    await leader.kill9();
    await sleep(2_000);
    await leader.restart();
    await Promise.all(workers);

    const before = entries.filter((e) => e.at < killedAt).length;
    const after = entries.filter((e) => e.at > killedAt + 2_500).length;
    expect(before).toBeGreaterThan(5);
    expect(after).toBeGreaterThan(5); // locking resumed after re-election and the old leader's return
    for (let i = 1; i < entries.length; i++) expect(entries[i].token).toBeGreaterThan(entries[i - 1].token);
    expect(overlaps).toBe(0);
    expect(errors).toBeLessThan(entries.length);
  }, 60_000);
});
