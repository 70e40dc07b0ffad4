// Simulation seed 2 (a worker process died): the wake-up subscriber reconnects, ioredis sends its
// automatic re-SUBSCRIBE, the network goes silent before the answer, and the app closes. The
// re-SUBSCRIBE nobody awaits was rejected when close() gave up waiting ("Connection is closed"),
// unhandled: the process crashed. Everything runs here, the proxy too, so the silence starts in
// the very tick the subscriber reports ready. Prints "closed" and exits 0, or crashes.
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { backendsOf } from '../harness/backends-of.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

async function main(): Promise<void> {
  const proxy = await TcpProxy.start(Number(new URL(process.env.WORKER_REDIS_URL!).port));
  @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: `redis://${proxy.endpoint}`, connectTimeoutMs: 500, commandTimeoutMs: 500 } })] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const locks = app.get(DistributedLockService);
  const key = process.env.WORKER_KEY ?? 'resubscribe-close';
  const holder = await locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
  // A wait opens the wake-up subscriber.
  await locks.acquire(key, { purpose: 'efficiency', wait: 100 }).catch(() => undefined);
  const subscriber = (backendsOf(app).get('redis') as unknown as { wake: { subscriber?: { once(e: 'ready', f: () => void): void } } }).wake.subscriber;
  if (!subscriber) throw new Error('no subscriber');
  const reconnected = new Promise<void>((resolve) =>
    subscriber.once('ready', () => {
      proxy.blackhole();
      resolve();
    }),
  );
  proxy.cut();
  await reconnected;
  void holder;
  await app.close();
  process.stdout.write('closed\n');
  proxy.heal();
  await proxy.close();
}

main().catch((error: unknown) => {
  process.stdout.write(`failed: ${(error as Error).message}\n`);
  process.exitCode = 1;
});
