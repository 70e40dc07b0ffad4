// A lock user in its own process, driven by its parent over IPC: the real thing for fault specs
// (kill -9, SIGSTOP). Runs from the compiled output (.tmp/compiled/test/workers/lock-worker.js).
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { createClient } from 'redis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { DistributedLockModule, DistributedLockService, MySqlFence, PgFence, RedisFence, type DistributedLockModuleOptions, type Lease } from '../../lib/index.js';
import { RedisBackend } from '../../lib/backends/redis/redis.backend.js';

export type WorkerCommand =
  /** `busyMs`: right after the grant, keep the event loop busy that long (CPU-bound work, a long GC pause). */
  | { op: 'acquire'; key: string; ttl: number; wait: number; purpose?: 'efficiency' | 'correctness'; busyMs?: number }
  | { op: 'release' }
  /** A PgFence (PostgreSQL workers) or MySqlFence (MySQL workers) update of `table` row `id` with the held lease's token. */
  | { op: 'fenced-update'; table: string; id: string; set: Record<string, unknown> }
  /** A RedisFence write of `key` on the Redis at `url` with the held lease's token. */
  | { op: 'fenced-write'; url: string; key: string; value: string }
  /**
   * `rounds` times: take `key`, read the plain counter `counter` on the Redis at `url`, yield a
   * little, write it back + 1, release — a read-modify-write only the lock keeps whole.
   */
  | { op: 'count'; key: string; url: string; counter: string; rounds: number; purpose?: 'efficiency' | 'correctness' }
  | { op: 'exit' };

export type WorkerEvent =
  | { event: 'ready' }
  | { event: 'waiting'; key: string }
  | { event: 'acquired'; key: string; token?: string }
  | { event: 'lost'; reason: string; at: number }
  | { event: 'released' }
  | { event: 'written'; token: string }
  | { event: 'counted'; rounds: number; failed: number }
  | { event: 'error'; name: string; message: string };

const send = (message: WorkerEvent): void => void process.send?.(message);

async function main(): Promise<void> {
  const redisUrl = process.env.WORKER_REDIS_URL;
  const etcdHosts = process.env.WORKER_ETCD_HOSTS;
  const postgresUrl = process.env.WORKER_POSTGRES_URL;
  const mysqlUrl = process.env.WORKER_MYSQL_URL;
  const zookeeper = process.env.WORKER_ZOOKEEPER;
  const redlock = process.env.WORKER_REDLOCK;
  // The module options as a whole (a BackendCase's server options): no backend named here.
  const given = process.env.WORKER_OPTIONS ? (JSON.parse(process.env.WORKER_OPTIONS) as DistributedLockModuleOptions) : undefined;
  const resource = postgresUrl ? new pg.Pool({ connectionString: postgresUrl, max: 2 }) : undefined;
  const mysqlResource = mysqlUrl ? mysql.createPool({ uri: mysqlUrl, connectionLimit: 2 }) : undefined;
  let fenceClient: Redis | undefined;
  // WORKER_REDIS_CLIENT (else the suite's TEST_REDIS_CLIENT) node-redis or iovalkey: the application's own client, as `redis.client`.
  const kind = process.env.WORKER_REDIS_CLIENT || process.env.TEST_REDIS_CLIENT;
  const nodeRedis = !redisUrl
    ? undefined
    : kind === 'node-redis'
      ? await createClient({ url: redisUrl }).on('error', () => undefined).connect()
      : kind === 'iovalkey'
        ? new Valkey(redisUrl).on('error', () => undefined)
        : undefined;
  @Module({
    imports: [
      DistributedLockModule.forRoot(given ?? {
        // WORKER_REDIS_HEARTBEAT_MS: a Redis backend with that waiterHeartbeatMs (not a module option).
        ...(redisUrl && !process.env.WORKER_REDIS_HEARTBEAT_MS ? { redis: nodeRedis ? { client: nodeRedis } : { url: redisUrl } } : {}),
        ...(redisUrl && process.env.WORKER_REDIS_HEARTBEAT_MS
          ? { backends: { r: new RedisBackend({ client: nodeRedis ?? new Redis(redisUrl), ownsClient: !nodeRedis, waiterHeartbeatMs: Number(process.env.WORKER_REDIS_HEARTBEAT_MS) }) }, purposes: { efficiency: 'r' } }
          : {}),
        ...(etcdHosts ? { etcd: { hosts: etcdHosts.split(','), sessionTtlSeconds: Number(process.env.WORKER_SESSION_TTL ?? 10) } } : {}),
        ...(postgresUrl ? { postgres: { connectionString: postgresUrl } } : {}),
        ...(mysqlUrl ? { mysql: { uri: mysqlUrl } } : {}),
        ...(redlock ? { redlock: { urls: redlock.split(',') } } : {}),
        ...(zookeeper ? { zookeeper: { connectionString: zookeeper, sessionTimeoutMs: Number(process.env.WORKER_ZK_SESSION_MS ?? 10_000) } } : {}),
      }),
    ],
  })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: false });
  const locks = app.get(DistributedLockService);
  let lease: Lease | undefined;
  process.on('message', (command: WorkerCommand) => {
    void (async () => {
      try {
        if (command.op === 'acquire') {
          const purpose = command.purpose ?? 'efficiency';
          const pending = locks.acquire(command.key, { purpose, ttl: command.ttl, wait: command.wait });
          send({ event: 'waiting', key: command.key });
          const held = await pending;
          if (command.busyMs) {
            const until = Date.now() + command.busyMs;
            while (Date.now() < until) {
              // synchronous work: nothing else of this process runs
            }
          }
          lease = held;
          held.signal.addEventListener('abort', () => {
            send({ event: 'lost', reason: (held.signal.reason as { reason?: string }).reason ?? 'unknown', at: Date.now() });
          });
          send({ event: 'acquired', key: command.key, token: held.token?.toString() });
        } else if (command.op === 'fenced-update') {
          // Whatever the lease's state: a paused holder writes late, and the fence must refuse it.
          if (mysqlResource) await new MySqlFence({ table: command.table }).update(mysqlResource, command.id, command.set, lease!.token!);
          else await new PgFence({ table: command.table }).update(resource!, command.id, command.set, lease!.token!);
          send({ event: 'written', token: lease!.token!.toString() });
        } else if (command.op === 'fenced-write') {
          fenceClient ??= new Redis(command.url, { maxRetriesPerRequest: 1 });
          await new RedisFence(fenceClient).write(command.key, command.value, lease!.token!);
          send({ event: 'written', token: lease!.token!.toString() });
        } else if (command.op === 'count') {
          fenceClient ??= new Redis(command.url, { maxRetriesPerRequest: 1 });
          const plain = fenceClient;
          let failed = 0;
          for (let i = 0; i < command.rounds; i++) {
            try {
              await locks.using(command.key, { purpose: command.purpose ?? 'efficiency', ttl: 5_000, wait: 20_000 }, async () => {
                const value = Number((await plain.get(command.counter)) ?? 0);
                await new Promise((resolve) => setTimeout(resolve, 1));
                await plain.set(command.counter, String(value + 1));
              });
            } catch {
              failed += 1;
            }
          }
          send({ event: 'counted', rounds: command.rounds, failed });
        } else if (command.op === 'release') {
          await lease?.release();
          send({ event: 'released' });
        } else {
          await app.close();
          await resource?.end();
          fenceClient?.disconnect();
          process.exit(0);
        }
      } catch (error) {
        send({ event: 'error', name: (error as Error).name, message: (error as Error).message });
      }
    })();
  });
  send({ event: 'ready' });
}

void main();
