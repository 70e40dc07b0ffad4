// An application whose own provider fails in onModuleInit, started the way a pod does:
// `bootstrap().catch(log)`. It must exit by itself — nothing the lock module opened may keep it
// alive. Runs from the compiled output; the parent measures how long the process lives.
import { Injectable, Module, type OnModuleInit } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService } from '../../lib/index.js';

@Injectable()
class UsesLocksAtInit implements OnModuleInit {
  constructor(private readonly locks: DistributedLockService) {}
  async onModuleInit(): Promise<void> {
    if (process.env.WORKER_LOCK_AT_INIT === '1') {
      // Talk to both backends first, so their connections are open when bootstrap fails.
      await this.locks.using('init-check', { purpose: 'efficiency' }, () => undefined);
      if (process.env.WORKER_ETCD_HOSTS) await this.locks.using('init-check', { purpose: 'correctness' }, () => undefined);
    }
  }
}

@Injectable()
class Broken implements OnModuleInit {
  onModuleInit(): void {
    throw new Error('the database migration failed');
  }
}

async function bootstrap(): Promise<void> {
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis: { url: process.env.WORKER_REDIS_URL! },
        ...(process.env.WORKER_ETCD_HOSTS ? { etcd: { hosts: process.env.WORKER_ETCD_HOSTS.split(',') } } : {}),
      }),
    ],
    providers: [UsesLocksAtInit, Broken],
  })
  class AppModule {}
  await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
}

bootstrap().catch((error: unknown) => {
  process.stdout.write(`bootstrap failed: ${(error as Error).message}\n`);
});
