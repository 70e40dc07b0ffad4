import { LeaseLostError, type Lease } from '../../lib/index.js';
import { monotonicNow } from '../../lib/common/validity.util.js';
import { backendsOf } from '../harness/backends-of.js';
import { freshZooKeeper, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { LEASE_INTERNALS } from '../../lib/engine/lease.js';

// Issue 33's flake hunt, Node 24 (fresh clone, 2026-12-03): zookeeper-backend.spec's "holder
// frozen (SIGSTOP) past its session" saw its lease lost as `force-released` — nobody had called
// forceRelease(). A process stopped inside its event loop's poll resumes there: it handles the
// watch on its own znode (deleted by the server with the expired session) before its expiry timer
// fires, and that watch meant "force-released". A znode gone while the session can no longer be
// vouched for is a lost session; only one gone while the session is known alive is somebody's
// forceRelease().
//
// Here the order is made by hand: the session's known-alive bound is moved into the past (what a
// stopped process finds on waking, before its timer has run), and the znode is deleted.

interface NodeLike {
  path: string;
  session: { client: { remove(path: string, version: number, cb: (error: Error | null) => void): void }; validity: { until: number } };
}

function nodeOf(app: LockApp, lease: Lease): NodeLike {
  const backend = backendsOf(app.app).get('zookeeper') as unknown as { holds: { nodes: Map<string, NodeLike> } };
  return backend.holds.nodes.get(LEASE_INTERNALS.core(lease).owner)!;
}

const remove = (node: NodeLike): Promise<void> =>
  new Promise((resolve, reject) => node.session.client.remove(node.path, -1, (error) => (error ? reject(error) : resolve())));

describe('ZooKeeper: why a holder lost its znode', () => {
  let server: BackendServer;
  let app: LockApp;
  beforeAll(async () => {
    server = await freshZooKeeper();
    app = await startLockApp(server.options);
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await server?.stop();
  });

  const opts = { purpose: 'correctness' as const, backend: 'zookeeper', ttl: 30_000 };

  it('gone after the session could have expired: session-lost, not force-released', async () => {
    const lease = await app.locks.acquire(uniqueKey('zk-reason-expired'), opts);
    const node = nodeOf(app, lease);
    // What a process stopped past its session sees on waking, before its expiry timer has run.
    node.session.validity.until = monotonicNow() - 1;
    await remove(node);
    await until(() => lease.signal.aborted, 5_000, 'the lease told');
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('session-lost');
  });

  it('gone while the session is known alive: force-released', async () => {
    const lease = await app.locks.acquire(uniqueKey('zk-reason-forced'), opts);
    await remove(nodeOf(app, lease));
    await until(() => lease.signal.aborted, 5_000, 'the lease told');
    expect((lease.signal.reason as LeaseLostError).reason).toBe('force-released');
  });
});
