import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import Redlock from 'redlock';
import { Mutex } from 'redis-semaphore';
import { createLock, createRedlock, IoredisAdapter } from 'redlock-universal';
import type { Implementation, Unlock } from './implementations.js';

// BENCH_TTL_MS: the leases' ttl (10 s unless set; a hot key's hand-off within the 1.5 s reservation needs no claim).
const TTL = Number(process.env.BENCH_TTL_MS ?? 10_000);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** redis-semaphore's Mutex on a connection of its own, retrying every 2 ms while the key is held. */
export function redisSemaphore(redisUrl: string): Implementation {
  const client = new Redis(redisUrl);
  return {
    name: 'redis-semaphore Mutex',
    backend: 'redis',
    async lock(key): Promise<Unlock> {
      const mutex = new Mutex(client, `sem:${key}`, { lockTimeout: TTL, acquireTimeout: 60_000, retryInterval: 2, refreshInterval: 0 });
      await mutex.acquire();
      return () => mutex.release();
    },
    close: async () => void client.disconnect(),
  };
}

/**
 * redlock-universal (the Redlock implementation Redis's documentation lists for Node) on `clients`:
 * createLock on one, createRedlock on several; a lock object per key, as a caller with dynamic keys
 * makes them; retrying every 2 ms while the key is held, like the other peers.
 */
function redlockUniversal(name: string, backend: Implementation['backend'], clients: Redis[]): Implementation {
  const adapters = clients.map((client) => new IoredisAdapter(client));
  const retry = { retryAttempts: 1_000_000, retryDelay: 2 };
  return {
    name,
    backend,
    async lock(key): Promise<Unlock> {
      const lock =
        adapters.length === 1 ? createLock({ adapter: adapters[0], key: `universal:${key}`, ttl: TTL, ...retry }) : createRedlock({ adapters, key: `universal:${key}`, ttl: TTL, ...retry });
      const handle = await lock.acquire();
      return async () => void (await lock.release(handle));
    },
    close: async () => clients.forEach((c) => c.disconnect()),
  };
}

/** The peers, each configured to wait (retry) rather than fail while the key is held. */
export async function peers(redisUrl: string, etcdHosts: string[]): Promise<Implementation[]> {
  const r1 = new Redis(redisUrl);
  const redlock = new Redlock([r1 as never], { retryCount: 1_000_000, retryDelay: 2, retryJitter: 2 });
  const r2 = new Redis(redisUrl);
  const sesame = new SesameRedlock([r2], { retryCount: 1_000_000, retryDelay: 2, retryJitter: 2 });
  const etcd = new Etcd3({ hosts: etcdHosts });
  return [
    {
      name: 'redlock 4',
      backend: 'redis',
      async lock(key): Promise<Unlock> {
        const lock = await redlock.lock(`redlock:${key}`, TTL);
        return async () => void (await lock.unlock());
      },
      close: async () => void r1.disconnect(),
    },
    {
      name: '@sesamecare-oss/redlock',
      backend: 'redis',
      async lock(key): Promise<Unlock> {
        const lock = await sesame.acquire([`sesame:${key}`], TTL);
        return async () => void (await lock.release());
      },
      close: async () => void r2.disconnect(),
    },
    redisSemaphore(redisUrl),
    redlockUniversal('redlock-universal', 'redis', [new Redis(redisUrl)]),
    {
      name: 'etcd3 Lock (retried)',
      backend: 'etcd',
      async lock(key): Promise<Unlock> {
        // etcd3's Lock fails at once when held (no queue): retry, as its users must.
        for (;;) {
          const lock = etcd.lock(`etcd3lock/${key}`).ttl(TTL / 1000);
          try {
            await lock.acquire();
            return async () => void (await lock.release());
          } catch {
            await sleep(1);
          }
        }
      },
      close: async () => etcd.close(),
    },
  ];
}

/** redlock 4, @sesamecare-oss/redlock and redlock-universal on the same masters as ours, retrying every 2 ms (+2 ms jitter) while held. */
export function redlockPeers(urls: string[]): Implementation[] {
  const forRedlock = urls.map((url) => new Redis(url));
  const redlock = new Redlock(forRedlock as never[], { retryCount: 1_000_000, retryDelay: 2, retryJitter: 2 });
  const forSesame = urls.map((url) => new Redis(url));
  const sesame = new SesameRedlock(forSesame, { retryCount: 1_000_000, retryDelay: 2, retryJitter: 2 });
  return [
    {
      name: 'redlock 4 (5 masters)',
      backend: 'redlock',
      async lock(key): Promise<Unlock> {
        const lock = await redlock.lock(`redlock:${key}`, TTL);
        return async () => void (await lock.unlock());
      },
      close: async () => forRedlock.forEach((c) => c.disconnect()),
    },
    {
      name: '@sesamecare-oss/redlock (5 masters)',
      backend: 'redlock',
      async lock(key): Promise<Unlock> {
        const lock = await sesame.acquire([`sesame:${key}`], TTL);
        return async () => void (await lock.release());
      },
      close: async () => forSesame.forEach((c) => c.disconnect()),
    },
    redlockUniversal('redlock-universal (5 masters)', 'redlock', urls.map((url) => new Redis(url))),
  ];
}
