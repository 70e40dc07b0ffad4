// A throwaway Nest 12 (ESM) project whose only Redis client is node-redis (`redis`; ioredis is not
// installed), compiled against the packed tarball. Prints one JSON line; test/package/package.spec.ts checks it.
import 'reflect-metadata';
import { createRequire } from 'node:module';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { createClient } from 'redis';
import { DistributedLock, DistributedLockModule, DistributedLockService } from 'nest-distributed-lock';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const key = `pkg-nr-${process.pid}`;
let inside = 0;
let most = 0;
let runs = 0;

@Injectable()
class Job {
  @DistributedLock({ purpose: 'efficiency', key, wait: 10_000 })
  async run(): Promise<void> {
    inside += 1;
    most = Math.max(most, inside);
    runs += 1;
    await sleep(20);
    inside -= 1;
  }
}

async function main(): Promise<void> {
  const client = await createClient({ url: process.env.REDIS_URL! }).on('error', () => undefined).connect();
  const boot = async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: { client } })], providers: [Job] })
    class AppModule {}
    return NestFactory.createApplicationContext(AppModule, { logger: false });
  };
  const [a, b] = [await boot(), await boot()];
  await Promise.all([a, b, a, b, a, b].map((app) => app.get(Job).run()));
  const held = await a.get(DistributedLockService).acquire(`${key}-service`, { purpose: 'efficiency', ttl: 5_000 });
  const busy = (await b.get(DistributedLockService).tryAcquire(`${key}-service`, { purpose: 'efficiency' })) === null;
  await held.release();
  await a.close();
  await b.close();
  let ioredis = 'not installed';
  try {
    createRequire(import.meta.url).resolve('ioredis');
    ioredis = 'installed';
  } catch {
    // expected: this project never installed it
  }
  console.log(JSON.stringify({ runs, most, busy, clientOpen: client.isOpen, ping: await client.ping(), ioredis }));
  await client.close();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
