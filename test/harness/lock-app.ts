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
