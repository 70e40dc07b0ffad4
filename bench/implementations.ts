import { Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import pg from 'pg';
import { DistributedLock, DistributedLockModule, DistributedLockService } from '../lib/index.js';

export type Backend = 'redis' | 'etcd' | 'postgres' | 'zookeeper' | 'redlock' | 'mysql';

/** Release function of a held lock. */
export type Unlock = () => Promise<void>;

/** One lock implementation under test, with its own connection(s). */
export interface Implementation {
  name: string;
  backend: Backend;
  /** The raw floor of its backend: ratios are against it. */
  floor?: boolean;
  /** A semaphore's permits: up to this many holders of one key at once are expected. */
  permits?: number;
  /** Acquire `key`, waiting while it is held (by polling or by the implementation's own means). */
  lock(key: string): Promise<Unlock>;
  close(): Promise<void>;
}

// BENCH_TTL_MS: the leases' ttl (10 s unless set; a hot key's hand-off within the 1.5 s reservation needs no claim).
const TTL = Number(process.env.BENCH_TTL_MS ?? 10_000);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const owner = (): string => Math.random().toString(36).slice(2) + Date.now().toString(36);

const COMPARE_AND_DELETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/** Raw Redis: SET NX PX + compare-and-delete, polling every 1 ms while busy. */
export async function redisFloor(url: string): Promise<Implementation> {
  const client = new Redis(url);
  const sha = (await client.script('LOAD', COMPARE_AND_DELETE)) as string;
  return {
    name: 'redis floor (SET NX + Lua del)',
    backend: 'redis',
    floor: true,
    async lock(key) {
      const id = owner();
      while ((await client.set(key, id, 'PX', TTL, 'NX')) !== 'OK') await sleep(1);
      return async () => void (await client.evalsha(sha, 1, key, id));
    },
    close: async () => void client.disconnect(),
  };
}

/**
 * Raw Redlock over the same masters: `SET NX PX` on all at once; a majority holds, else the ones
 * that said yes are given back (compare-and-delete) and it polls every 1 ms; unlock deletes on all.
 * No per-node timeout, no drift, no validity check: the floor of what the algorithm costs.
 */
export async function redlockFloor(urls: string[]): Promise<Implementation> {
  const clients = urls.map((url) => new Redis(url));
  const shas = await Promise.all(clients.map((c) => c.script('LOAD', COMPARE_AND_DELETE) as Promise<string>));
  const quorum = Math.floor(clients.length / 2) + 1;
  const del = (key: string, id: string, which: number[]): Promise<unknown> => Promise.all(which.map((i) => clients[i].evalsha(shas[i], 1, key, id)));
  return {
    name: 'redlock floor (SET NX on 5 + Lua del)',
    backend: 'redlock',
    floor: true,
    async lock(key) {
      const id = owner();
      for (;;) {
        const replies = await Promise.all(clients.map((c) => c.set(key, id, 'PX', TTL, 'NX')));
        const yes = replies.flatMap((r, i) => (r === 'OK' ? [i] : []));
        if (yes.length >= quorum) break;
        if (yes.length) await del(key, id, yes);
        await sleep(1);
      }
      return async () => void (await del(key, id, clients.map((_, i) => i)));
    },
    close: async () => clients.forEach((c) => c.disconnect()),
  };
}

/** Raw etcd: one txn put-if-absent on a shared lease + one delete, polling every 1 ms while busy. */
export async function etcdFloor(hosts: string[]): Promise<Implementation> {
  const client = new Etcd3({ hosts });
  const lease = client.lease(30);
  const id = await lease.grant();
  return {
    name: 'etcd floor (txn put + delete)',
    backend: 'etcd',
    floor: true,
    async lock(key) {
      const k = Buffer.from(`floor/${key}`);
      for (;;) {
        const r = await client.kv.txn({
          compare: [{ key: k, target: 'Create', result: 'Equal', create_revision: 0 }],
          success: [{ request_put: { key: k, value: Buffer.alloc(0), lease: id } }],
          failure: [],
        });
        if (r.succeeded) break;
        await sleep(1);
      }
      return async () => void (await client.kv.deleteRange({ key: k }));
    },
    close: async () => {
      lease.release();
      client.close();
    },
  };
}

/**
 * Raw PostgreSQL: `pg_try_advisory_lock` + `pg_advisory_unlock`, polling every 1 ms while busy. A
 * session lock belongs to its connection, so a lock keeps one checked out of a pool of 16 until it
 * is unlocked: one connection when sequential, one per worker under contention (nothing is
 * written: an advisory lock lives in the server's shared memory, not in a table or the WAL).
 */
export async function pgFloor(url: string): Promise<Implementation> {
  const pool = new pg.Pool({ connectionString: url, max: 16 });
  return {
    name: 'pg floor (try_advisory_lock + unlock)',
    backend: 'postgres',
    floor: true,
    async lock(key) {
      const client = await pool.connect();
      try {
        while (!(await client.query('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [key])).rows[0].ok) await sleep(1);
      } catch (error) {
        client.release(true);
        throw error;
      }
      return async () => {
        await client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [key]);
        client.release();
      };
    },
    close: () => pool.end(),
  };
}

/** node-zookeeper-client's callback API as a promise. */
const zk = <T>(fn: (cb: (error: (Error & { code?: number }) | null, value: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((error, value) => (error ? reject(error) : resolve(value))));

/**
 * Raw ZooKeeper: create an ephemeral znode `/floor/<key>` (NODE_EXISTS: busy, poll every 1 ms) and
 * delete it — two writes, no sequence, no queue, no token.
 */
export async function zkFloor(connectionString: string): Promise<Implementation> {
  const { createClient } = (await import(ZK_PACKAGE)).default as { createClient: (c: string, o: object) => any };
  const client = createClient(connectionString, { sessionTimeout: 10_000 });
  client.connect();
  await new Promise((resolve) => client.once('connected', resolve));
  await zk((cb) => client.create('/floor', cb)).catch((e: { code?: number }) => {
    if (e.code !== -110) throw e;
  });
  return {
    name: 'zk floor (create ephemeral + delete)',
    backend: 'zookeeper',
    floor: true,
    async lock(key) {
      const path = `/floor/${encodeURIComponent(key)}`;
      for (;;) {
        try {
          await zk((cb) => client.create(path, undefined, 1 /* EPHEMERAL */, cb));
          break;
        } catch (e) {
          if ((e as { code?: number }).code !== -110) throw e;
          await sleep(1);
        }
      }
      return () => zk((cb) => client.remove(path, -1, cb));
    },
    close: async () => client.close(),
  };
}
const ZK_PACKAGE: string = 'node-zookeeper-client';

type Target = string | string[];

function moduleOptions(backend: Backend, target: Target): Parameters<typeof DistributedLockModule.forRoot>[0] {
  if (backend === 'redis') return { redis: { url: target as string } };
  if (backend === 'etcd') return { etcd: { hosts: target as string[] } };
  if (backend === 'zookeeper') return { zookeeper: { connectionString: target as string } };
  if (backend === 'redlock') return { redlock: { urls: target as string[] } };
  // BENCH_MYSQL_CONNECTIONS: the pool's size (the default 4 unless set; the floors use 16).
  if (backend === 'mysql') return { mysql: { uri: target as string, maxConnections: Number(process.env.BENCH_MYSQL_CONNECTIONS ?? 4) } };
  return { postgres: { connectionString: target as string } };
}

async function lockApp(options: Parameters<typeof DistributedLockModule.forRoot>[0], providers: Function[] = []): Promise<INestApplicationContext> {
  @Module({ imports: [DistributedLockModule.forRoot(options)], providers: providers as never[] })
  class BenchModule {}
  return NestFactory.createApplicationContext(BenchModule, { logger: false });
}

/** Ours, through DistributedLockService.acquire (waiting by the backend's queue, not polling). */
export async function ours(backend: Backend, target: Target): Promise<Implementation> {
  const app = await lockApp(moduleOptions(backend, target));
  const locks = app.get(DistributedLockService);
  const purpose = backend === 'redis' || backend === 'redlock' ? 'efficiency' : 'correctness';
  return {
    name: `ours: service (${backend})`,
    backend,
    async lock(key) {
      const lease = await locks.acquire(key, { purpose, ttl: TTL, wait: 60_000 });
      return () => lease.release();
    },
    close: () => app.close(),
  };
}

/**
 * Ours on the application's own Redis client of another kind than ioredis (what `forRoot({ redis:
 * { client } })` takes): node-redis 6 (`createClient`, RESP3 by default) or iovalkey.
 */
export async function oursOnClient(kind: 'node-redis' | 'iovalkey', url: string): Promise<Implementation> {
  let client: { close(): Promise<unknown> };
  let given: unknown;
  if (kind === 'node-redis') {
    const { createClient } = await import('redis');
    const c = await createClient({ url }).on('error', () => undefined).connect();
    client = { close: () => c.close() };
    given = c;
  } else {
    const { Redis } = await import('iovalkey');
    const c = new Redis(url);
    client = { close: () => c.quit() };
    given = c;
  }
  const app = await lockApp({ redis: { client: given as never } });
  const locks = app.get(DistributedLockService);
  return {
    name: `ours: service (redis on ${kind})`,
    backend: 'redis',
    async lock(key) {
      const lease = await locks.acquire(key, { purpose: 'efficiency', ttl: TTL, wait: 60_000 });
      return () => lease.release();
    },
    close: async () => {
      await app.close();
      await client.close();
    },
  };
}

/**
 * Ours, a semaphore of `permits` through the service (`npm run bench -- --semaphore`): one holder
 * at a time sequentially shows what the semaphore's own path costs against the plain lock
 * (`permits: 1` is the plain lock itself); on one hot key up to `permits` hold at once.
 */
export async function oursSemaphore(backend: Backend, target: Target, permits: number): Promise<Implementation> {
  const app = await lockApp(moduleOptions(backend, target));
  const locks = app.get(DistributedLockService);
  const purpose = backend === 'redis' || backend === 'redlock' ? 'efficiency' : 'correctness';
  return {
    name: `ours: semaphore, permits ${permits} (${backend})`,
    backend,
    permits,
    async lock(key) {
      const lease = await locks.acquire(key, { purpose, ttl: TTL, wait: 60_000, permits });
      return () => lease.release();
    },
    close: () => app.close(),
  };
}

/** Ours, through a @DistributedLock-decorated method: the critical section runs inside the call. */
export async function oursDecorator(backend: Backend, target: Target): Promise<Implementation> {
  const purpose = backend === 'redis' || backend === 'redlock' ? 'efficiency' : 'correctness';
  @Injectable()
  class Guarded {
    @DistributedLock({ purpose, key: (key: string) => key, ttl: TTL, wait: 60_000 })
    async run(_key: string, section: () => Promise<void>): Promise<void> {
      await section();
    }
  }
  const app = await lockApp(moduleOptions(backend, target), [Guarded]);
  const guarded = app.get(Guarded);
  return {
    name: `ours: decorator (${backend})`,
    backend,
    // The decorator holds the lock for the duration of the call: bridge to lock()/unlock().
    lock: (key) =>
      new Promise<Unlock>((resolveLock, rejectLock) => {
        let finishSection!: () => void;
        const sectionDone = new Promise<void>((resolve) => (finishSection = resolve));
        const call = guarded.run(key, async () => {
          resolveLock(async () => {
            finishSection();
            await call;
          });
          await sectionDone;
        });
        call.catch(rejectLock);
      }),
    close: () => app.close(),
  };
}
