import { InvalidLockOptionsError, LeaseLostError, type DistributedLockModuleOptions, type Lease, type LockPurpose } from '../../lib/index.js';
import { sleep, startLockApp, uniqueKey, until, type LockApp } from './lock-app.js';

/** One backend's read-write case: how to reach its server, and what it promises. */
export interface ReadWriteCase {
  backend: string;
  purpose: LockPurpose;
  /** The backend issues fencing tokens (each holder its own, larger than any before on the key). */
  fencing: boolean;
  /** Start (or reach) the server: the module options, and how to stop what was started. */
  server: () => Promise<{ options: DistributedLockModuleOptions; stop(): Promise<void> }>;
}

/** Resolves with `true` once `promise` settles, or `false` if it has not within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  const deadline = Date.now() + ms;
  while (!settled && Date.now() < deadline) await sleep(5);
  return settled;
}

/**
 * The read-write contract every backend with `mode` meets, against its real server: three
 * application instances (three engines, three clients) share the server and nothing else. What a
 * user notices: readers together, a writer alone, no writer starved, upgrade without a window,
 * tokens in grant order across modes, inspect() saying who holds.
 */
export function describeReadWrite(c: ReadWriteCase): void {
  describe(`read-write locks (mode) on ${c.backend}`, () => {
    let running: Awaited<ReturnType<ReadWriteCase['server']>>;
    const apps: LockApp[] = [];
    const target = { backend: c.backend };
    let a: LockApp;
    let b: LockApp;
    let c3: LockApp;
    const opts = (mode: 'read' | 'write' | 'upgradeable' | undefined, more: object = {}) => ({ purpose: c.purpose, backend: c.backend, ...(mode ? { mode } : {}), ttl: 20_000, ...more });
    beforeAll(async () => {
      running = await c.server();
      [a, b, c3] = await Promise.all([startLockApp(running.options), startLockApp(running.options), startLockApp(running.options)]);
      apps.push(a, b, c3);
    }, 60_000);
    afterAll(async () => {
      for (const app of apps) await app.close();
      await running?.stop();
    });
    const all = () => [a, b, c3];

    it('8 readers from three applications hold at once, each with its own lease and a larger token than any before; inspect() shows them', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const readers = await Promise.all(Array.from({ length: 8 }, (_, i) => all()[i % 3].locks.acquire(key, opts('read', { wait: 5_000 }))));
      expect(readers.map((lease) => lease.mode)).toEqual(Array(8).fill('read'));
      expect(readers.every((lease) => !lease.signal.aborted && lease.remainingMs() > 0)).toBe(true);
      const info = await c3.locks.inspect(key, target);
      expect(info).toMatchObject({ key, backend: c.backend, mode: 'read', readers: 8, waiters: 0 });
      if (c.fencing) expect(new Set(readers.map((lease) => lease.token)).size).toBe(8);
      // A writer finds it busy; so does a plain (default-mode) lock, which is the write mode.
      expect(await b.locks.tryAcquire(key, opts('write'))).toBeNull();
      expect(await b.locks.tryAcquire(key, opts(undefined))).toBeNull();
      await Promise.all(readers.map((lease) => lease.release()));
      expect(await a.locks.inspect(key, target)).toBeNull();
    });

    it('a writer waits for the readers and then holds alone, with a token larger than every reader\'s; readers wait for it in turn', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const readers = await Promise.all([a.locks.acquire(key, opts('read')), b.locks.acquire(key, opts('read'))]);
      const writing = c3.locks.acquire(key, opts('write', { wait: 10_000 }));
      expect(await settlesWithin(writing, 300)).toBe(false);
      await readers[0].release();
      expect(await settlesWithin(writing, 300)).toBe(false);
      await readers[1].release();
      const writer = await writing;
      expect(writer.mode).toBe('write');
      if (c.fencing) expect(readers.every((reader) => reader.token! < writer.token!)).toBe(true);
      expect(await a.locks.inspect(key, target)).toMatchObject({ mode: 'write' });
      expect(await a.locks.tryAcquire(key, opts('read'))).toBeNull();
      expect(await b.locks.tryAcquire(key, opts('upgradeable'))).toBeNull();
      const reading = a.locks.acquire(key, opts('read', { wait: 10_000 }));
      expect(await settlesWithin(reading, 300)).toBe(false);
      await writer.release();
      const reader = await reading;
      if (c.fencing) expect(reader.token! > writer.token!).toBe(true);
      await reader.release();
    });

    it('no writer starves: a reader that comes while a writer waits queues behind it', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const first = await a.locks.acquire(key, opts('read'));
      const order: string[] = [];
      const writing = b.locks.acquire(key, opts('write', { wait: 10_000 })).then((lease) => (order.push('writer'), lease));
      await until(async () => ((await c3.locks.inspect(key, target))?.waiters ?? 0) >= 1, 5_000, 'the writer queued');
      // The key is held for reading, but a writer waits: a new reader does not jump it.
      expect(await c3.locks.tryAcquire(key, opts('read'))).toBeNull();
      const late = c3.locks.acquire(key, opts('read', { wait: 10_000 })).then((lease) => (order.push('late reader'), lease));
      expect(await settlesWithin(late, 300)).toBe(false);
      await first.release();
      const writer = await writing;
      expect(await settlesWithin(late, 300)).toBe(false);
      await writer.release();
      const reader = await late;
      expect(order).toEqual(['writer', 'late reader']);
      if (c.fencing) expect(first.token! < writer.token! && writer.token! < reader.token!).toBe(true);
      await reader.release();
    });

    it('upgrade(): the upgradeable read becomes the write lease with no moment another writer could enter, readers coming meanwhile wait behind it', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const upgradeable = await a.locks.acquire(key, opts('upgradeable'));
      const reader = await b.locks.acquire(key, opts('read'));
      expect(upgradeable.mode).toBe('upgradeable');
      // One upgradeable at a time; beside it, readers.
      expect(await c3.locks.tryAcquire(key, opts('upgradeable'))).toBeNull();
      const writerAhead = c3.locks.acquire(key, opts('write', { wait: 10_000 }));
      await until(async () => ((await c3.locks.inspect(key, target))?.waiters ?? 0) >= 1, 5_000, 'the writer queued');
      const upgrading = upgradeable.upgrade();
      expect(await settlesWithin(upgrading, 300)).toBe(false);
      const lateReader = b.locks.acquire(key, opts('read', { wait: 10_000 }));
      expect(await settlesWithin(lateReader, 300)).toBe(false);
      // The last other reader leaves: the upgrade goes first, ahead of the writer that waited longer.
      await reader.release();
      await upgrading;
      expect(upgradeable.mode).toBe('write');
      expect(upgradeable.signal.aborted).toBe(false);
      if (c.fencing) expect(upgradeable.token! > reader.token!).toBe(true);
      expect(await settlesWithin(writerAhead, 300)).toBe(false);
      expect(await a.locks.inspect(key, target)).toMatchObject({ mode: 'write' });
      await upgradeable.extend();
      await upgradeable.release();
      const writer = await writerAhead;
      if (c.fencing) expect(writer.token! > upgradeable.token!).toBe(true);
      await writer.release();
      await (await lateReader).release();
    });

    it('upgrade() of a lone upgradeable read is at once; of a read or a write it is refused naming mode', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const upgradeable = await a.locks.acquire(key, opts('upgradeable'));
      const before = upgradeable.token;
      await upgradeable.upgrade();
      await upgradeable.upgrade();
      expect(upgradeable.mode).toBe('write');
      if (c.fencing) expect(upgradeable.token! > before!).toBe(true);
      expect(await b.locks.tryAcquire(key, opts('read'))).toBeNull();
      await upgradeable.release();
      const reader = await a.locks.acquire(key, opts('read'));
      await expect(reader.upgrade()).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'mode' });
      await reader.release();
      const writer = await a.locks.acquire(key, opts('write'));
      await expect(writer.upgrade()).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'mode' });
      await writer.release();
    });

    it('a lease released while its upgrade waits: the upgrade rejects with LeaseLostError and the key goes on to the next', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const upgradeable = await a.locks.acquire(key, opts('upgradeable'));
      const reader = await b.locks.acquire(key, opts('read'));
      const upgrading = upgradeable.upgrade();
      const outcome = upgrading.then(() => 'upgraded', (error: Error) => error);
      await sleep(100);
      await upgradeable.release();
      expect(await outcome).toBeInstanceOf(LeaseLostError);
      // Nothing of it is left first in line: a writer gets the key once the reader goes.
      const writing = c3.locks.acquire(key, opts('write', { wait: 10_000 }));
      await reader.release();
      await (await writing).release();
    });

    it('forceRelease() while an upgrade waits: every reader is told, the upgrade rejects, and a writer queued behind gets the key at once (review: it slept through the free key)', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      const upgradeable = await a.locks.acquire(key, opts('upgradeable'));
      const reader = await b.locks.acquire(key, opts('read'));
      const upgrading = upgradeable.upgrade().then(() => 'upgraded', (error: Error) => error);
      await sleep(100);
      const writing = c3.locks.acquire(key, opts('write', { wait: 10_000 }));
      await until(async () => ((await c3.locks.inspect(key, target))?.waiters ?? 0) >= 1, 5_000, 'the writer queued');
      expect(await c3.locks.forceRelease(key, target)).toBe(true);
      expect(await upgrading).toBeInstanceOf(LeaseLostError);
      expect(reader.signal.aborted && upgradeable.signal.aborted).toBe(true);
      const started = Date.now();
      const writer = await writing;
      expect(Date.now() - started).toBeLessThan(1_500);
      await writer.release();
      // The lost leases are never released by their holders here: nothing of theirs is left either.
      expect(await a.locks.tryAcquire(key, opts('upgradeable'))).not.toBeNull();
    });

    it('reentrancy: a read inside a write is the write lease; a write inside a read is refused naming upgradeable', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      await a.locks.using(key, opts('write'), async (outer: Lease) => {
        const inner = await a.locks.acquire(key, opts('read'));
        expect(inner.reentrant).toBe(true);
        expect(inner.token).toBe(outer.token);
        await inner.release();
      });
      await a.locks.using(key, opts('read'), async () => {
        await expect(a.locks.acquire(key, opts('write'))).rejects.toThrow(/mode 'read'.*upgradeable/);
        await expect(a.locks.acquire(key, opts(undefined))).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'mode' });
        const again = await a.locks.acquire(key, opts('read'));
        expect(again.reentrant).toBe(true);
        await again.release();
      });
      await a.locks.using(key, opts('upgradeable'), async (outer: Lease) => {
        await expect(a.locks.acquire(key, opts('write'))).rejects.toThrow(/upgrade\(\) the outer lease first/);
        await outer.upgrade();
        const inner = await a.locks.acquire(key, opts('write'));
        expect(inner.reentrant).toBe(true);
        await inner.release();
      });
      expect(await b.locks.inspect(key, target)).toBeNull();
    });

    it('several keys in one mode: readers of both keys share them; a writer of one waits', async () => {
      const [k1, k2] = [uniqueKey(`rw-${c.backend}-m`), uniqueKey(`rw-${c.backend}-m`)];
      const first = await a.locks.acquire([k1, k2], opts('read'));
      const second = await b.locks.acquire([k2, k1], opts('read'));
      expect(await c3.locks.tryAcquire(k2, opts('write'))).toBeNull();
      await expect(c3.locks.acquire([k1, k2], opts('upgradeable'))).rejects.toMatchObject({ field: 'mode' });
      await first.release();
      await second.release();
      await (await c3.locks.acquire(k2, opts('write'))).release();
    });

    it('a reader that dies (its lease runs out) stops holding up a writer at its ttl', async () => {
      const key = uniqueKey(`rw-${c.backend}`);
      // A lease nobody renews: its holder is as good as gone once its ttl passes.
      const reader = await a.locks.acquire(key, opts('read', { ttl: 1_000 }));
      const started = Date.now();
      const writer = await b.locks.acquire(key, opts('write', { wait: 10_000 }));
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(reader.signal.aborted).toBe(true);
      await writer.release();
    });
  });
}
