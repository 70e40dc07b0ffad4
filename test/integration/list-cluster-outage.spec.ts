import { Cluster, Redis } from 'ioredis';
import { LockBackendUnavailableError } from '../../lib/index.js';
import { RedisServer } from '../harness/servers.mjs';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review of list() on a Redis Cluster: listKeys() walks `client.nodes('master')`, and
// ioredis empties that pool while the cluster is unreachable (refreshSlotsCache fails →
// connectionPool.reset([])). With no node to SCAN, no command is sent, nothing times out, and
// list() resolves [] — "no lock held" on the board — instead of failing like every other call
// (README: "every call is bounded by the backend's command timeout (LockBackendUnavailableError)";
// the board: "A backend that cannot be reached shows its error").

describe('list() on a Redis Cluster that cannot be reached', () => {
  let server: RedisServer;
  let cluster: Cluster;
  let app: LockApp;
  beforeAll(async () => {
    server = await RedisServer.start({ cluster: true });
    const admin = new Redis(server.url);
    await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    for (let i = 0; i < 200 && !String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'); i++) await sleep(25);
    admin.disconnect();
    cluster = new Cluster([{ host: '127.0.0.1', port: server.port }]);
    cluster.on('error', () => undefined);
    app = await startLockApp({ redis: { client: cluster, commandTimeoutMs: 300, connectTimeoutMs: 300 } });
  }, 60_000);
  afterAll(async () => {
    cluster?.disconnect();
    await app?.close();
    await server?.stop().catch(() => undefined);
  });

  it('fails with LockBackendUnavailableError (as inspect() does); it never answers "nothing held"', async () => {
    const key = uniqueKey('review-cluster-outage');
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 60_000 });
    expect((await app.locks.list({ backend: 'redis' })).map((info) => info.key)).toContain(key);

    await server.kill9();
    const outcomes: string[] = [];
    const inspected: string[] = [];
    for (let i = 0; i < 15; i++) {
      await sleep(200);
      try {
        const listed = await app.locks.list({ backend: 'redis' });
        outcomes.push(`resolved with ${listed.length} key(s)`);
      } catch (error) {
        outcomes.push(error instanceof LockBackendUnavailableError ? 'LockBackendUnavailableError' : `other: ${(error as Error).message}`);
      }
      inspected.push(await app.locks.inspect(key, { backend: 'redis' }).then(
        () => 'resolved',
        (error) => (error instanceof LockBackendUnavailableError ? 'LockBackendUnavailableError' : 'other'),
      ));
    }
    await lease.release().catch(() => undefined);
    // inspect() of the same key during the same outage: always the error.
    expect(inspected.filter((o) => o !== 'LockBackendUnavailableError')).toEqual([]);
    // list(): the same, never an empty answer.
    expect(outcomes.filter((o) => o !== 'LockBackendUnavailableError')).toEqual([]);
  }, 60_000);
});
