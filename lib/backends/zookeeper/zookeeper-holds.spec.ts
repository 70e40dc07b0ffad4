import { LossListeners } from '../loss-listeners.js';
import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';
import { ZooKeeperHolds } from './zookeeper-holds.js';
import { ZooKeeperRequests } from './zookeeper-requests.js';
import type { ZooKeeperNode } from './zookeeper-semaphore.js';
import type { ZooKeeperSession } from './zookeeper-session.js';
import type { ZooKeeperSessions } from './zookeeper-sessions.js';

// The bookkeeping of a holder's watch of its own znode, against node-zookeeper-client's order of
// events: it reads a socket buffer whole, registering a read's watcher and calling the read back,
// then handling the next packet of the same buffer — a notification there fires the watcher before
// anything awaiting the read runs again.

const NODE_DATA_CHANGED = 3;

function setUp(afterAnswer: (watcher: (event: unknown) => void) => void): { holds: ZooKeeperHolds; node: ZooKeeperNode; reads: () => number } {
  let reads = 0;
  const client = {
    getData(_path: string, watcher: ((event: unknown) => void) | undefined, callback: (error: null, data: Buffer, stat: unknown) => void) {
      reads += 1;
      setImmediate(() => {
        callback(null, Buffer.alloc(0), { version: 0, mzxid: Buffer.alloc(8) });
        if (watcher && reads === 1) afterAnswer(watcher);
      });
    },
  } as unknown as ZooKeeperClientLike;
  const session = { client, lost: false, validUntilMs: Number.MAX_SAFE_INTEGER, hold: () => undefined, unhold: () => undefined } as unknown as ZooKeeperSession;
  const requests = new ZooKeeperRequests((_operation, _key, send) => send());
  const holds = new ZooKeeperHolds({ name: 'zookeeper', requests, sessions: {} as ZooKeeperSessions, lossListeners: new LossListeners(), ownsClient: true });
  const node: ZooKeeperNode = { key: 'k', parent: '/p', path: '/p/o-0000000001', name: 'o-0000000001', session, holding: false, watcher: () => undefined };
  holds.nodes.set('o', node);
  return { holds, node, reads: () => reads };
}

describe('ZooKeeperHolds: the watch of our own znode', () => {
  it('a change told right after the read that set the watch (same buffer) counts as spent: the grant sets it again', async () => {
    // A waiter's wake-up read, then the hand-over's write to its znode in the same buffer.
    const { holds, node, reads } = setUp((watcher) => watcher({ getType: () => NODE_DATA_CHANGED }));
    expect(await holds.readOwn('o', node)).not.toBeNull();
    expect(node.ownWatched).toBe(false);
    holds.granted('o', node, 7n);
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads()).toBe(2);
  });

  it('a read with no change after it leaves the watch set: the grant sends nothing more', async () => {
    const { holds, node, reads } = setUp(() => undefined);
    await holds.readOwn('o', node);
    expect(node.ownWatched).toBe(true);
    holds.granted('o', node, 7n);
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads()).toBe(1);
  });
});
