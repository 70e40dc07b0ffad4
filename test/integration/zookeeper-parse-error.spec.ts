import zookeeper from 'node-zookeeper-client';
import { backendsOf } from '../harness/backends-of.js';
import { freshZooKeeper, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';

// The simulation's seed 93 (long run, 2026-12-03): a worker process died of an uncaught exception
// thrown inside node-zookeeper-client's socket `data` handler — `Error: Unknown code: -950599680`
// at ConnectionManager.onSocketData (Exception.create of a reply's error code) — right after the
// ZooKeeper server was killed and restarted. A lock library must never end the application's
// process because of bytes a server sent: such a reply now resets the connection (the client's
// own remedy for a reply it does not expect), its requests in flight fail, and locking goes on.
//
// Here the reply is made up: a frame answering the request in flight (its xid) with an error code
// no ZooKeeper has, delivered through the client's socket as the server's bytes are.

/** What this spec uses of a node-zookeeper-client client (the package ships no types). */
interface ZkClient {
  connectionManager: unknown;
  exists(path: string, callback: (error: Error | null) => void): void;
  getState(): { name: string };
  once(event: 'connected', listener: () => void): void;
  connect(): void;
  close(): void;
}

interface ManagerLike {
  socket: { emit(event: 'data', buffer: Buffer): boolean };
  pendingQueue: Array<{ request: { header: { xid: number } } }>;
}

/** A ZooKeeper reply frame: length, then the reply header (xid, zxid, err). */
function reply(xid: number, err: number): Buffer {
  const frame = Buffer.alloc(4 + 16);
  frame.writeInt32BE(16, 0);
  frame.writeInt32BE(xid, 4);
  frame.writeBigInt64BE(1n, 8);
  frame.writeInt32BE(err, 16);
  return frame;
}

/** The client of the backend's current session (internal). */
function sessionClient(app: LockApp): ZkClient {
  const backend = backendsOf(app.app).get('zookeeper') as unknown as { sessions: { current?: { client: ZkClient } } };
  return backend.sessions.current!.client;
}

describe('ZooKeeper: a reply the client cannot parse', () => {
  let server: BackendServer;
  beforeAll(async () => {
    server = await freshZooKeeper();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  async function check(app: LockApp, client: ZkClient): Promise<void> {
    const key = uniqueKey('zk-parse');
    const opts = { purpose: 'correctness' as const, backend: 'zookeeper', ttl: 10_000 };
    const before = await app.locks.acquire(key, opts);
    const manager = (client as unknown as { connectionManager: ManagerLike }).connectionManager;
    // A request in flight (written, waiting for its answer), answered with an error code nobody knows.
    const answered = new Promise<Error | undefined>((resolve) => client.exists('/', (error: Error | null) => resolve(error ?? undefined)));
    expect(manager.pendingQueue.length).toBeGreaterThan(0);
    const xid = manager.pendingQueue[0].request.header.xid;
    // Before: this threw `Unknown code: -950599680` out of the socket's data handler (an uncaught exception).
    expect(() => manager.socket.emit('data', reply(xid, -950599680))).not.toThrow();
    // The request fails (its outcome unknown), the connection is reset and comes back.
    const error = await answered;
    expect(error?.name ?? String(error)).toMatch(/CONNECTION_LOSS/);
    await until(() => client.getState().name === 'SYNC_CONNECTED', 10_000, 'the client connected again');
    // Locking goes on: the lease is still held (its znode on the same session), another key can be taken.
    expect(await app.locks.inspect(key, { backend: 'zookeeper' })).not.toBeNull();
    await before.release();
    const after = await app.locks.acquire(uniqueKey('zk-parse-after'), opts);
    await after.release();
  }

  it('resets the connection instead of throwing out of the socket handler (clients the module opens)', async () => {
    const app = await startLockApp(server.options);
    try {
      await app.locks.inspect(uniqueKey('zk-warm'), { backend: 'zookeeper' });
      await check(app, sessionClient(app));
    } finally {
      await app.close();
    }
  }, 60_000);

  it('…and on a client the application passes, already connected', async () => {
    const connectionString = (server.options as { zookeeper: { connectionString: string } }).zookeeper.connectionString;
    const client = (zookeeper as { createClient(c: string, o: object): ZkClient }).createClient(connectionString, { sessionTimeout: 4_000, retries: 0 });
    await new Promise<void>((resolve) => {
      client.once('connected', () => resolve());
      client.connect();
    });
    const app = await startLockApp({ zookeeper: { client: client as never } });
    try {
      await app.locks.inspect(uniqueKey('zk-warm'), { backend: 'zookeeper' });
      await check(app, client);
    } finally {
      await app.close();
      client.close();
    }
  }, 60_000);
});
