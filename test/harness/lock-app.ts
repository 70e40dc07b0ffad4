import { Module, type DynamicModule, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService, type DistributedLockModuleOptions } from '../../lib/index.js';

/** The Redis URL `npm test` started for this run. */
export function redisUrl(): string {
  const url = process.env.TEST_REDIS_URL;
  if (!url) throw new Error('TEST_REDIS_URL is not set: run the suite with `npm test`, which starts redis-server');
  return url;
}

/** The etcd endpoints `npm test` started for this run. */
export function etcdHosts(): string[] {
  const hosts = process.env.TEST_ETCD_HOSTS;
  if (!hosts) throw new Error('TEST_ETCD_HOSTS is not set: run the suite with `npm test`, which starts etcd');
  return hosts.split(',');
}

export interface LockApp {
  app: INestApplicationContext;
  locks: DistributedLockService;
  close(): Promise<void>;
}

const validRedisUrl = (url: string): boolean => {
  try {
    const parsed = new URL(url);
    return /^rediss?:$/i.test(parsed.protocol) && Number(parsed.port || 6379) <= 65_535;
  } catch {
    return false;
  }
};

/**
 * TEST_REDIS_CLIENT=node-redis|iovalkey: an application's `redis: { url }` becomes `redis: { client }`
 * of that kind, connected to the same URL (node-redis first connects, within 3 s; a URL it cannot
 * reach or parse stays a URL), which the
 * application closes after its app — so a Redis spec written for the module's own ioredis client
 * runs on the other clients unchanged (`TEST_REDIS_CLIENT=node-redis npm test -- test/integration/redis`).
 */
async function withTestClient(options: DistributedLockModuleOptions): Promise<{ options: DistributedLockModuleOptions; close(): Promise<void> }> {
  const kind = process.env.TEST_REDIS_CLIENT;
  const redis = options.redis;
  if (!kind || kind === 'ioredis' || !redis || typeof redis.url !== 'string' || redis.options !== undefined) return { options, close: async () => undefined };
  const { url, ...rest } = redis;
  if (!validRedisUrl(url)) return { options, close: async () => undefined }; // a spec of the URL option itself
  if (kind === 'iovalkey') {
    const { Redis: Valkey } = await import('iovalkey');
    const client = new Valkey(url).on('error', () => undefined);
    return { options: { ...options, redis: { ...rest, client } }, close: async () => void client.disconnect() };
  }
  if (kind !== 'node-redis') throw new Error(`TEST_REDIS_CLIENT: ioredis, node-redis or iovalkey, got ${kind}`);
  const { createClient } = await import('redis');
  const open = (): ReturnType<typeof createClient> => createClient({ url, socket: { reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 500) } });
  let client: ReturnType<typeof open> | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    client = open().on('error', () => undefined);
    await Promise.race([client.connect(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('not connected within 3 s')), 3_000)))]);
  } catch {
    // A URL node-redis cannot reach or parse: the spec is about the URL option itself (a bad URL, a
    // server not up yet), so the module gets it as written.
    client?.destroy();
    return { options, close: async () => undefined };
  } finally {
    clearTimeout(timer);
  }
  const connected = client;
  return { options: { ...options, redis: { ...rest, client: connected } }, close: async () => void (connected.isOpen && connected.destroy()) };
}

/** A real Nest application (its own module instance, clients and service) importing the lock module. */
export async function startLockApp(imports: DistributedLockModuleOptions | DynamicModule): Promise<LockApp> {
  const own = 'module' in imports ? undefined : await withTestClient(imports as DistributedLockModuleOptions);
  const lockModule = own ? DistributedLockModule.forRoot(own.options) : (imports as DynamicModule);
  @Module({ imports: [lockModule] })
  class AppModule {}
  let app: INestApplicationContext;
  try {
    app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  } catch (error) {
    await own?.close();
    throw error;
  }
  let closed = false;
  return {
    app,
    locks: app.get(DistributedLockService),
    close: async () => {
      if (closed) return;
      closed = true;
      await app.close();
      await own?.close();
    },
  };
}

/** A distinct key per test so tests never see each other's locks. */
let counter = 0;
export function uniqueKey(name: string): string {
  counter += 1;
  return `${name}:${process.pid}:${Date.now().toString(36)}:${counter}`;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Wait until the backend shows at least `count` callers queued for `key` (inspect()'s `waiters`),
 * bounded: the state a spec needs before it goes on ("B is queued behind A"), never a sleep that
 * hopes it is reached. Not for Redlock, whose waiters retry instead of queueing.
 */
export async function untilQueued(
  locks: DistributedLockService,
  key: string,
  target: Parameters<DistributedLockService['inspect']>[1],
  count: number,
  withinMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const waiters = (await locks.inspect(key, target))?.waiters ?? 0;
    if (waiters >= count) return;
    if (Date.now() > deadline) throw new Error(`${count} caller(s) queued for ${JSON.stringify(key)}: not within ${withinMs} ms (${waiters} queued)`);
    await sleep(5);
  }
}

/** Poll `check` until it holds, bounded: a state a spec waits for instead of sleeping and hoping. */
export async function until(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(5);
  }
}
