// Holds a correctness lease on etcd (so a session lease with keep-alives exists), prints "ready",
// then closes its app 1 s later — while the parent blackholes the network to etcd. The process
// must exit by itself soon after: nothing the module opened may outlive close().
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { backendsOf } from '../harness/backends-of.js';

async function main(): Promise<void> {
  @Module({ imports: [DistributedLockModule.forRoot({ etcd: { hosts: process.env.WORKER_ETCD_HOSTS!.split(','), commandTimeoutMs: 500 } })] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const locks = app.get(DistributedLockService);
  const lease = await locks.acquire(process.env.WORKER_KEY ?? 'close-exit', { purpose: 'correctness', ttl: 10_000 });
  process.stdout.write('ready\n');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  void lease; // still held: close() releases it
  if (process.env.WORKER_LEFTOVER_WATCH) {
    // A watch left on the module's own client (as a waiter's watch whose cancel never completed
    // would be): the watch stream is a gRPC call without a deadline.
    const client = (backendsOf(app).get('etcd') as unknown as { client: { watch(): { key(k: string): { create(): Promise<unknown> } } } }).client;
    await client.watch().key('close-exit-leftover').create();
    process.stdout.write('watching\n');
  }
  if (process.env.WORKER_UNKNOWN_WRITE) {
    // Into the silence: this attempt times out with its outcome unknown, so the backend schedules
    // deletes of the key it may have written (they must not outlive close() either).
    const outcome = await locks.tryAcquire('close-exit-unknown', { purpose: 'correctness', ttl: 10_000 }).then(
      () => 'granted',
      (error: Error) => error.name,
    );
    process.stdout.write(`unknown write: ${outcome}\n`);
  }
  const started = Date.now();
  await app.close();
  process.stdout.write(`closed in ${Date.now() - started} ms\n`);
  if (process.env.WORKER_DEBUG) setTimeout(() => process.stdout.write(`alive: ${JSON.stringify(process.getActiveResourcesInfo())}\n`), 3_000).unref();
}

main().catch((error: unknown) => {
  process.stdout.write(`failed: ${(error as Error).message}\n`);
  process.exitCode = 1;
});
