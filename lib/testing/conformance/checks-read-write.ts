import type { LockBackend } from '../../backends/lock-backend.interface.js';
import { ReaderBackend } from '../../backends/read-write.util.js';
import { waitUntilGranted } from './checks-queue.js';
import type { ConformanceCheck } from './conformance-check.js';
import { expect, sleep, within, type CheckContext } from './conformance-context.js';

const readWrite = (backend: LockBackend): string | undefined => (backend.capabilities.readWrite ? undefined : 'capabilities.readWrite is false');

/** Each instance as a reader of `mode` sees it (a writer is the plain lock: the instance itself). */
const readers = (c: CheckContext, mode: 'read' | 'upgradeable'): ReaderBackend[] => c.instances.map((backend) => new ReaderBackend(backend, mode));

/** `token` grows past `before` (on a fencing backend; elsewhere nothing to check). */
function expectLarger(c: CheckContext, token: bigint | undefined, before: bigint | undefined, what: string): void {
  if (!c.at(0).capabilities.fencing) return;
  expect(typeof token === 'bigint', `${what} carried no bigint token on a fencing backend`);
  if (before !== undefined) expect(token > before, `${what}: token ${token} is not larger than ${before}, granted on the key before it`);
}

/** Read-write locks (`capabilities.readWrite`): readers share, a writer is alone, one line across modes, upgrade without a window. */
export const READ_WRITE_CHECKS: readonly ConformanceCheck[] = [
  {
    name: 'rw-readers-share-writer-alone',
    about: 'readers on different instances hold a key together, each with a larger token; a writer (a plain lock) is refused while they hold, and holds alone once they leave',
    skipUnless: readWrite,
    async run(c) {
      const key = c.key();
      const views = readers(c, 'read');
      const owners = [c.owner(), c.owner(), c.owner()];
      let last: bigint | undefined;
      for (let i = 0; i < owners.length; i++) {
        const grant = await c.acquire(views[i % views.length], key, owners[i]);
        expect(grant.acquired, `reader ${i + 1} was refused while only readers held the key`);
        expectLarger(c, grant.token, last, `reader ${i + 1}`);
        last = grant.token;
      }
      expect(!(await c.acquire(c.at(1), key, c.owner())).acquired, 'a writer was granted a key its readers held');
      const inspected = await c.at(2).inspect?.(key);
      if (inspected) expect(inspected.mode === 'read' && inspected.readers === 3, `inspect() of a key 3 readers hold said mode ${inspected.mode}, readers ${inspected.readers}`);
      expect((await views[1].extend(key, owners[1], c.ttlMs)) === true, 'extend() by a reader answered false');
      expect((await views[1].extend(key, c.owner(), c.ttlMs)) === false, 'extend() of a reader by a stranger answered true');
      for (let i = 0; i < owners.length; i++) expect(await views[i % views.length].release(key, owners[i]), `release() by reader ${i + 1} answered false`);
      const writer = c.owner();
      const grant = await c.acquire(c.at(1), key, writer);
      expect(grant.acquired, 'a writer was refused the key once every reader had left');
      expectLarger(c, grant.token, last, 'the writer after the readers');
      expect(!(await c.acquire(views[0], key, c.owner())).acquired, 'a reader was granted a key a writer held');
      expect(!(await c.acquire(readers(c, 'upgradeable')[2], key, c.owner())).acquired, 'an upgradeable read was granted a key a writer held');
      const inspectedWriter = await c.at(2).inspect?.(key);
      if (inspectedWriter) expect(inspectedWriter.mode === 'write', `inspect() of a key a writer holds said mode ${inspectedWriter.mode}`);
    },
  },
  {
    name: 'rw-no-writer-starvation',
    about: 'a reader that comes while a writer waits queues behind it; the writer is woken when the last reader leaves, and the reader after the writer, with tokens in that order',
    skipUnless: readWrite,
    async run(c) {
      const key = c.key();
      const views = readers(c, 'read');
      const first = c.owner();
      const firstGrant = await c.acquire(views[0], key, first);
      expect(firstGrant.acquired, 'a free key was not granted to a reader');
      const writer = c.owner();
      expect(!(await c.acquire(c.at(1), key, writer, { queue: true })).acquired, 'a writer was granted a key a reader held');
      const late = c.owner();
      expect(!(await c.acquire(views[2], key, late)).acquired, 'a reader was let in beside a reader while a writer waited (writers starve)');
      expect(!(await c.acquire(views[2], key, late, { queue: true })).acquired, 'a queued reader was let in ahead of a waiting writer');
      const writing = waitUntilGranted(c, c.at(1), key, writer, c.wakeWithinMs, c.ttlMs * 10);
      writing.catch(() => undefined); // awaited below, unless the check fails before (it then ends with c.signal)
      await sleep(50);
      expect(await views[0].release(key, first), 'release() by the reader answered false');
      const { token: writerToken } = await writing;
      expectLarger(c, writerToken, firstGrant.token, 'the writer after the reader');
      expect(!(await c.acquire(views[2], key, late, { queue: true })).acquired, 'the queued reader was let in beside the writer');
      const reading = waitUntilGranted(c, views[2], key, late, c.wakeWithinMs, c.ttlMs * 10);
      reading.catch(() => undefined);
      await sleep(50);
      expect(await c.at(1).release(key, writer), 'release() by the writer answered false');
      const { token: lateToken } = await reading;
      expectLarger(c, lateToken, writerToken, 'the reader after the writer');
    },
  },
  {
    name: 'rw-upgrade-without-window',
    about: 'upgrade() of an upgradeable read waits first in line for the other readers, ahead of a writer that waited longer, and then holds alone with a larger token; one upgradeable read at a time',
    skipUnless: readWrite,
    async run(c) {
      const key = c.key();
      const upgrading = readers(c, 'upgradeable')[0];
      const u = c.owner();
      expect((await c.acquire(upgrading, key, u)).acquired, 'a free key was not granted to an upgradeable read');
      expect(!(await c.acquire(readers(c, 'upgradeable')[1], key, c.owner())).acquired, 'a second upgradeable read was granted beside the first');
      const reader = c.owner();
      const readerGrant = await c.acquire(readers(c, 'read')[1], key, reader);
      expect(readerGrant.acquired, 'a reader was refused beside an upgradeable read');
      const writer = c.owner();
      expect(!(await c.acquire(c.at(2), key, writer, { queue: true })).acquired, 'a writer was granted a key readers held');
      const first = await upgrading.upgrade(key, u, c.ttlMs);
      expect(!first.upgraded && first.held, `upgrade() with another reader holding answered ${JSON.stringify(first)}, not { upgraded: false, held: true }`);
      const turn = upgrading.waitForUpgrade(key, u, c.ttlMs * 10, c.signal);
      turn.catch(() => undefined);
      await sleep(50);
      expect(await readers(c, 'read')[1].release(key, reader), 'release() by the reader answered false');
      await within(c.wakeWithinMs, 'the waiting upgrade after the last other reader left', turn);
      const done = await upgrading.upgrade(key, u, c.ttlMs);
      expect(done.upgraded, 'upgrade() with no other reader left was refused');
      expectLarger(c, done.token, readerGrant.token, 'the upgraded write lease');
      expect(!(await c.acquire(c.at(2), key, writer, { queue: true })).acquired, 'the writer that waited was granted the key beside the upgraded lease');
      expect(!(await c.acquire(readers(c, 'read')[1], key, c.owner())).acquired, 'a reader was granted beside the upgraded lease');
      // Upgraded, the hold is a writer's: renewed and given back as one.
      expect((await upgrading.extend(key, u, c.ttlMs)) === true, 'extend() of the upgraded lease answered false');
      expect(await upgrading.release(key, u), 'release() of the upgraded lease answered false');
      const { token } = await waitUntilGranted(c, c.at(2), key, writer, c.wakeWithinMs, c.ttlMs * 10);
      expectLarger(c, token, done.token, 'the writer after the upgraded lease');
    },
  },
];
