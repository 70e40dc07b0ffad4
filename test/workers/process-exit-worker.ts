// Applications that fail or close the way pods do, with the lock module in use: each must exit by
// itself soon after — nothing the module opened (a socket, a session, a lockAtLeastFor tail) may
// keep the process alive. Runs from the compiled output; the parent measures how long it lives.
//   WORKER_SCENARIO=listen-fail      bootstrap succeeds, app.listen() fails (port in use)
//   WORKER_SCENARIO=bootstrap-fail   a provider's onModuleInit fails after a lock was used
//   WORKER_SCENARIO=close            the application closes normally after a lock was used
//   WORKER_SCENARIO=close-connecting the application closes while its first lock call is still opening the backend's connection
//   WORKER_BACKEND=redis|etcd|zookeeper   the backend the lock is taken on (zookeeper: WORKER_ZOOKEEPER)
//   WORKER_AT_LEAST=<ms>             the lock's lockAtLeastFor (0: none)
//   WORKER_CONTEND=1                 a call also waited for a busy key before
//   WORKER_HOLD=1                    the lock is still held (acquire(), not released) when it fails or closes
import { Injectable, Module, type OnApplicationBootstrap, type OnModuleInit } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService } from '../../lib/index.js';

const scenario = process.env.WORKER_SCENARIO ?? 'close';
const backend = process.env.WORKER_BACKEND ?? 'redis';
const atLeast = Number(process.env.WORKER_AT_LEAST ?? '0');
const key = process.env.WORKER_KEY ?? `process-exit-${process.pid}`;
const started = performance.now();
const say = (line: string): void => void process.stdout.write(`${line} @${Math.round(performance.now() - started)}ms\n`);

async function useLock(locks: DistributedLockService): Promise<void> {
  const purpose = backend === 'redis' ? 'efficiency' : 'correctness';
  if (process.env.WORKER_HOLD === '1') {
    // Still held when the application fails or closes (its work is not done).
    await locks.acquire(key, { purpose, ttl: 20_000, lockAtLeastFor: atLeast });
    say('lock held');
    return;
  }
  if (process.env.WORKER_CONTEND === '1') {
    // A second caller waits for the key (Redis: the wake-up subscriber; etcd: a watch).
    const first = await locks.acquire(`${key}:contended`, { purpose, ttl: 20_000 });
    const second = locks.acquire(`${key}:contended`, { purpose, ttl: 20_000, wait: 10_000 });
    setTimeout(() => void first.release(), 200);
    await (await second).release();
    say('waited for the lock');
  }
  await locks.using(key, { purpose, ttl: 20_000, lockAtLeastFor: atLeast }, () => undefined);
  say('lock used');
}

@Injectable()
class UsesLocks implements OnModuleInit, OnApplicationBootstrap {
  constructor(private readonly locks: DistributedLockService) {}
  async onModuleInit(): Promise<void> {
    if (scenario !== 'bootstrap-fail') return;
    await useLock(this.locks);
    // A later step of this application's start fails (a migration, a config check).
    throw new Error('the database migration failed');
  }
  async onApplicationBootstrap(): Promise<void> {
    if (scenario !== 'bootstrap-fail' && scenario !== 'close-connecting') await useLock(this.locks);
  }
}

@Module({
  imports: [
    DistributedLockModule.forRoot(
      backend === 'etcd'
        ? { etcd: { hosts: process.env.WORKER_ETCD_HOSTS!.split(',') } }
        : backend === 'zookeeper'
          ? { zookeeper: { connectionString: process.env.WORKER_ZOOKEEPER! } }
          : { redis: { url: process.env.WORKER_REDIS_URL! } },
    ),
  ],
  providers: [UsesLocks],
})
class AppModule {}

async function main(): Promise<void> {
  if (scenario === 'listen-fail') {
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    // The parent holds this port: listen() fails after the application has bootstrapped.
    await app.listen(Number(process.env.WORKER_BUSY_PORT), '127.0.0.1');
    say('listening (unexpected)');
    return;
  }
  if (scenario === 'close-connecting') {
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
    const locks = app.get(DistributedLockService);
    const first = locks.acquire(key, { purpose: backend === 'redis' ? 'efficiency' : 'correctness', ttl: 20_000 });
    first.then(
      () => say('lock held (unexpected)'),
      (error: Error) => say(`first call: ${error.message}`),
    );
    await app.close();
    say('closed');
    return;
  }
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  say('bootstrapped');
  await app.close();
  say('closed');
}

main().catch((error: unknown) => say(`failed: ${(error as Error).message}`));
if (process.env.WORKER_DEBUG) setTimeout(() => say(`alive: ${JSON.stringify(process.getActiveResourcesInfo())}`), 4_000).unref();
