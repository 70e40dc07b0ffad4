import { Redis } from 'ioredis';
import { RedisBackend } from '../../lib/backends/redis/redis.backend.js';
import { redisUrl, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';

// Issue 35: a waiter handed a key it holds longer than the 1.5 s reservation writes its claim
// (its own ttl, owner-checked) before its own code runs. These cases are the ways that write could
// wait for the holder's synchronous work — the lease would then end at the reservation, however
// long its ttl, and the next waiter would enter beside a holder still at work.
const busyFor = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // CPU-bound work right after the grant (or a long GC pause): no timer, no I/O runs meanwhile.
  }
};

/** A backend on a client of the test's own, with its wake-up subscriber (a duplicate of it) in hand. */
function backendOn(client: Redis, name: string): { backend: RedisBackend; subscriber: () => Redis } {
  let subscriber: Redis | undefined;
  const duplicate = client.duplicate.bind(client);
  client.duplicate = ((...args: Parameters<Redis['duplicate']>) => (subscriber = duplicate(...args))) as Redis['duplicate'];
  return {
    backend: new RedisBackend({ client, ownsClient: true, name }),
    subscriber: () => {
      if (!subscriber) throw new Error('the wake-up subscriber is not open yet');
      return subscriber;
    },
  };
}

describe('Redis: the claim of a handed-off key is written before the holder runs', () => {
  let a: LockApp;
  let raw: Redis;
  const opts = { purpose: 'efficiency' as const, ttl: 10_000 };
  const lockKey = (key: string): string => `lock:{${key}}`;

  beforeAll(async () => {
    a = await startLockApp({ redis: { url: redisUrl() } });
    raw = new Redis(redisUrl());
  });
  afterAll(async () => {
    await a.close();
    raw.disconnect();
  });

  /**
   * A holds `key`; B (on `client`, hooked by `beforeHandOff` in the tick its wake-up arrives)
   * queues and is handed the key, then works 2.5 s synchronously. Afterwards the key must still be
   * B's for about the rest of its 10 s ttl, and B's lease not lost.
   */
  async function handOffToBusyHolder(client: Redis, beforeHandOff?: (subscriber: Redis) => void): Promise<void> {
    const { backend, subscriber } = backendOn(client, 'b');
    const b = await startLockApp({ backends: { b: backend }, purposes: { efficiency: 'b' } });
    try {
      const key = uniqueKey('claim-before-work');
      const holder = await a.locks.acquire(key, opts);
      const waiting = b.locks.acquire(key, { ...opts, wait: 10_000 });
      // Queued, and its first look at the key answered: the release below is then B's hand-off by
      // message (its next look, half a second on, would find the key handed to it and set the ttl itself).
      await until(async () => (await raw.hlen(`${lockKey(key)}:q2a`)) === 1, 5_000, 'B queued and looked again');
      if (beforeHandOff) subscriber().prependListener('message', () => beforeHandOff(subscriber()));
      await holder.release(); // hands the key to B for the 1.5 s reservation: B's ttl is longer
      const lease = await waiting;
      busyFor(2_500);
      // The claim, had it waited for the work, reaches Redis only now: past the reservation the key
      // has expired and the claim finds it gone. Written before the work, it set the full ttl.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await raw.get(lockKey(key))).not.toBeNull();
      expect(await raw.pttl(lockKey(key))).toBeGreaterThan(5_000);
      expect(lease.signal.aborted).toBe(false);
      await lease.release();
      expect(await raw.exists(lockKey(key))).toBe(0);
    } finally {
      await b.close();
      await backend.close(); // passed in `backends`: the application's to close
    }
  }

  it('on a client another user of it corked in the tick of the hand-off (its writes held to the next tick)', async () => {
    // Another backend or library on the same client corks the socket to batch its own writes, and
    // uncorks at the next tick — which comes after B's synchronous work. Before 9d89753 the claim
    // uncorked only the backend's own cork: it left after the work, and the key was lost.
    const client = new Redis(redisUrl());
    await handOffToBusyHolder(client, () => {
      const stream = (client as unknown as { stream: { cork(): void; uncork(): void } }).stream;
      // As a backend sending from a promise's continuation corks: its next tick comes once every
      // microtask of this turn has run — the hand-off's, and the new holder's own code after it.
      queueMicrotask(() => {
        stream.cork();
        process.nextTick(() => stream.uncork());
      });
    });
  }, 30_000);

  it('on a client with enableAutoPipelining (which sends commands together at the next tick)', async () => {
    // ioredis' auto-pipelining queues a command and writes it at the next tick: a claim sent
    // through it would leave after the work. The waiter asks the server first instead.
    await handOffToBusyHolder(new Redis(redisUrl(), { enableAutoPipelining: true }));
  }, 30_000);

  describe('a holder that had refreshed its place in line', () => {
    // A waiter queued longer than one heartbeat has a refresh record (`:q2a`); handed the key, its
    // release deletes the record, so the backend remembers the holder until then. A lease that ends
    // without a release (forced, or lost at an extend) must be forgotten too: else a leak per lease.
    async function refreshedHolder(): Promise<{ b: LockApp; backend: RedisBackend; key: string; lease: Awaited<ReturnType<LockApp['locks']['acquire']>> }> {
      const { backend } = backendOn(new Redis(redisUrl()), 'b');
      const b = await startLockApp({ backends: { b: backend }, purposes: { efficiency: 'b' } });
      const key = uniqueKey('refreshed-holder');
      const holder = await a.locks.acquire(key, opts);
      const waiting = b.locks.acquire(key, { ...opts, wait: 10_000 });
      await until(async () => (await raw.hlen(`${lockKey(key)}:q2a`)) === 1, 5_000, 'B refreshed its place');
      await holder.release();
      const lease = await waiting;
      expect(backend.bookkeeping().holdersRefreshed).toHaveLength(1);
      return { b, backend, key, lease };
    }

    it('is forgotten when an operator force-releases its key', async () => {
      const { b, backend, key, lease } = await refreshedHolder();
      try {
        expect(await a.locks.forceRelease(key, { purpose: 'efficiency' })).toBe(true);
        await until(() => lease.signal.aborted, 3_000, "B's lease lost");
        expect(backend.bookkeeping().holdersRefreshed).toEqual([]);
        await lease.release();
        expect(await raw.exists(`${lockKey(key)}:q2a`)).toBe(0);
      } finally {
        await b.close();
        await backend.close(); // passed in `backends`: the application's to close
      }
    }, 30_000);

    it('is forgotten when its key was lost and an extend finds it gone', async () => {
      const { b, backend, key, lease } = await refreshedHolder();
      try {
        await raw.del(lockKey(key)); // lost: a restart without persistence, for this key
        await expect(lease.extend(10_000)).rejects.toThrow();
        expect(backend.bookkeeping().holdersRefreshed).toEqual([]);
        await lease.release();
      } finally {
        await b.close();
        await backend.close(); // passed in `backends`: the application's to close
      }
    }, 30_000);
  });
});
