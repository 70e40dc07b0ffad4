// Holds a correctness lease on etcd (so a session lease with keep-alives exists), prints "ready",
// then closes its app 1 s later — while the parent blackholes the network to etcd. The process
// must exit by itself soon after: nothing the module opened may outlive close().
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService } from '../../lib/index.js';

async function main(): Promise<void> {
  @Module({ imports: [DistributedLockModule.forRoot({ etcd: { hosts: process.env.WORKER_ETCD_HOSTS!.split(','), commandTimeoutMs: 500 } })] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const locks = app.get(DistributedLockService);
  const lease = await locks.acquire('close-exit', { purpose: 'correctness', ttl: 10_000 });
  process.stdout.write('ready\n');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  void lease; // still held: close() releases it
  const started = Date.now();
  await app.close();
  process.stdout.write(`closed in ${Date.now() - started} ms\n`);
  if (process.env.WORKER_DEBUG) setTimeout(() => process.stdout.write(`alive: ${JSON.stringify(process.getActiveResourcesInfo())}\n`), 3_000).unref();
}

main().catch((error: unknown) => {
  process.stdout.write(`failed: ${(error as Error).message}\n`);
  process.exitCode = 1;
});
