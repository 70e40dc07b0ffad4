import { Logger } from '@nestjs/common';
import { LOGGER_CONTEXT } from '../distributed-lock.constants.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockBackend } from './lock-backend.interface.js';
import type { EtcdClientLike } from './etcd/etcd-client.interface.js';
import type { RedisClientLike } from './redis/redis-client.interface.js';
import { redactUrl, scrubCredentials } from '../common/redact.util.js';
import {
  type ResolvedEtcdOptions,
  type ResolvedModuleOptions,
  type ResolvedRedisOptions,
} from '../options/module-options.util.js';
import { EtcdBackend } from './etcd/etcd.backend.js';
import { MemoryBackend } from './memory/memory.backend.js';
import { RedisBackend } from './redis/redis.backend.js';

async function createRedisClient(o: ResolvedRedisOptions): Promise<RedisClientLike> {
  let ioredis: { Redis: new (...args: any[]) => RedisClientLike };
  try {
    ioredis = (await import('ioredis')) as unknown as typeof ioredis;
  } catch (error) {
    throw new InvalidLockOptionsError('redis', `needs the ioredis package (npm install ioredis): ${(error as Error).message}`, 'DistributedLockModule options');
  }
  const options = { connectTimeout: o.connectTimeoutMs, ...o.options };
  let client: RedisClientLike;
  try {
    client = o.url ? new ioredis.Redis(o.url, options) : new ioredis.Redis(options);
  } catch (error) {
    // Never rethrow ioredis' own error: a URL parse failure carries the whole URL (password
    // included) as `input`, and inspecting or logging the error would print it.
    throw new InvalidLockOptionsError(
      o.url ? 'redis.url' : 'redis.options',
      `ioredis refused it: ${scrubCredentials((error as Error)?.message ?? String(error))}${o.url ? ` (${redactUrl(o.url)})` : ''}`,
      'DistributedLockModule options',
    );
  }
  // Without a listener ioredis prints every reconnect attempt; operations report outages themselves.
  client.on('error', () => undefined);
  return client;
}

async function createEtcdClient(o: ResolvedEtcdOptions): Promise<EtcdClientLike> {
  let etcd3: { Etcd3: new (options: Record<string, unknown>) => EtcdClientLike };
  try {
    etcd3 = (await import('etcd3')) as unknown as typeof etcd3;
  } catch (error) {
    throw new InvalidLockOptionsError('etcd', `needs the etcd3 package (npm install etcd3): ${(error as Error).message}`, 'DistributedLockModule options');
  }
  // etcd3 retries a broken watch stream after an exponential backoff of up to 30 s, on a ref'd
  // timer nobody can clear: pending at close(), it kept the process alive that long. Ours grows
  // to 1 s (a re-watch a second against a cluster that is down costs nothing).
  const faultHandling = (o.options?.faultHandling ?? {}) as Record<string, unknown>;
  return new etcd3.Etcd3({ ...o.options, hosts: o.hosts, faultHandling: { ...faultHandling, watchBackoff: faultHandling.watchBackoff ?? watchBackoff() } });
}

/** What etcd3's watch manager asks of a backoff: the next delay, and the one after. */
export interface WatchBackoff {
  readonly duration: number;
  next(): WatchBackoff;
}

/** 100 ms doubling to `maxMs`, with ±20 % jitter so processes do not reconnect in step. */
export function watchBackoff(maxMs = 1_000, base = 50): WatchBackoff {
  const duration = Math.round(base * (0.8 + Math.random() * 0.4));
  return { duration, next: () => watchBackoff(maxMs, Math.min(maxMs, base * 2)) };
}

/** Build every configured backend. Only clients created here are owned (closed) by the module. */
export async function createBackends(options: ResolvedModuleOptions): Promise<Map<string, LockBackend>> {
  const backends = new Map<string, LockBackend>();
  if (options.redis) {
    const owns = options.redis.client === undefined;
    backends.set(
      'redis',
      new RedisBackend({
        client: options.redis.client ?? (await createRedisClient(options.redis)),
        ownsClient: owns,
        keyPrefix: options.redis.keyPrefix,
        connectTimeoutMs: options.redis.connectTimeoutMs,
        commandTimeoutMs: options.redis.commandTimeoutMs,
        log: new Logger(LOGGER_CONTEXT),
      }),
    );
  }
  if (options.etcd) {
    backends.set(
      'etcd',
      new EtcdBackend({
        client: options.etcd.client ?? (await createEtcdClient(options.etcd)),
        ownsClient: options.etcd.client === undefined,
        prefix: options.etcd.prefix,
        sessionTtlSeconds: options.etcd.sessionTtlSeconds,
        commandTimeoutMs: options.etcd.commandTimeoutMs,
        driftFactor: options.driftFactor,
      }),
    );
  }
  if (options.memory) backends.set(options.memory.name, new MemoryBackend(options.memory.name));
  for (const [name, backend] of Object.entries(options.backends)) backends.set(name, backend);
  return backends;
}
