/**
 * The runner's own look at the lock servers (invariant 5, "a key held after its app closed"): one
 * Nest app per seed with every backend, straight to the servers (no proxy, so no fault of a
 * worker's network), asking each backend's inspect() — which, unlike the service's, names the
 * holder's owner id. It never takes a lock.
 */
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule } from '../../lib/index.js';
import type { HeldLock } from '../../lib/backends/lock-backend.interface.js';
import { backendsOf } from '../harness/backends-of.js';

export interface InspectorConfig {
  redisUrl: string;
  etcdHosts: string[];
  postgresUrl: string;
  mysqlUrl: string;
  zookeeperConnectionString: string;
  redlockUrls: string[];
  sessionTtlSeconds: number;
}

export interface Inspector {
  /** Who holds `key` on `backend` (its owner id, when the backend names it); null: nobody; throws when it cannot tell. */
  holder(backend: string, key: string): Promise<HeldLock | null>;
  close(): Promise<void>;
}

const within = <T>(promise: Promise<T>, ms: number): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });

export async function startInspector(config: InspectorConfig): Promise<Inspector> {
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis: { url: config.redisUrl, connectTimeoutMs: 1_000, commandTimeoutMs: 1_000 },
        etcd: { hosts: config.etcdHosts, sessionTtlSeconds: config.sessionTtlSeconds, commandTimeoutMs: 1_000 },
        postgres: { connectionString: config.postgresUrl, connectTimeoutMs: 1_000, commandTimeoutMs: 1_000 },
        mysql: { uri: config.mysqlUrl, connectTimeoutMs: 1_000, commandTimeoutMs: 1_000 },
        zookeeper: { connectionString: config.zookeeperConnectionString, sessionTimeoutMs: config.sessionTtlSeconds * 1_000, connectTimeoutMs: 1_000, commandTimeoutMs: 1_000 },
        redlock: { urls: config.redlockUrls },
        metrics: false,
      }),
    ],
  })
  class InspectorModule {}
  const app: INestApplicationContext = await NestFactory.createApplicationContext(InspectorModule, { logger: false });
  const backends = backendsOf(app);
  return {
    holder: async (backend, key) => {
      const b = backends.get(backend);
      if (!b?.inspect) throw new Error(`backend ${backend} has no inspect()`);
      return within(b.inspect(key), 2_000);
    },
    close: () => app.close(),
  };
}
