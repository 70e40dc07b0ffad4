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

/** A real Nest application (its own module instance, clients and service) importing the lock module. */
export async function startLockApp(imports: DistributedLockModuleOptions | DynamicModule): Promise<LockApp> {
  const lockModule = 'module' in imports ? (imports as DynamicModule) : DistributedLockModule.forRoot(imports as DistributedLockModuleOptions);
  @Module({ imports: [lockModule] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  let closed = false;
  return {
    app,
    locks: app.get(DistributedLockService),
    close: async () => {
      if (closed) return;
      closed = true;
      await app.close();
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
