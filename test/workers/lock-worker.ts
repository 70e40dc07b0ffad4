// A lock user in its own process, driven by its parent over IPC: the real thing for fault specs
// (kill -9, SIGSTOP). Runs from the compiled output (.tmp/compiled/test/workers/lock-worker.js).
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService, type Lease } from '../../lib/index.js';

export type WorkerCommand =
  | { op: 'acquire'; key: string; ttl: number; wait: number }
  | { op: 'release' }
  | { op: 'exit' };

export type WorkerEvent =
  | { event: 'ready' }
  | { event: 'waiting'; key: string }
  | { event: 'acquired'; key: string }
  | { event: 'released' }
  | { event: 'error'; name: string; message: string };

const send = (message: WorkerEvent): void => void process.send?.(message);

async function main(): Promise<void> {
  @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: process.env.WORKER_REDIS_URL! } })] })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: false });
  const locks = app.get(DistributedLockService);
  let lease: Lease | undefined;
  process.on('message', (command: WorkerCommand) => {
    void (async () => {
      try {
        if (command.op === 'acquire') {
          const pending = locks.acquire(command.key, { purpose: 'efficiency', ttl: command.ttl, wait: command.wait });
          send({ event: 'waiting', key: command.key });
          lease = await pending;
          send({ event: 'acquired', key: command.key });
        } else if (command.op === 'release') {
          await lease?.release();
          send({ event: 'released' });
        } else {
          await app.close();
          process.exit(0);
        }
      } catch (error) {
        send({ event: 'error', name: (error as Error).name, message: (error as Error).message });
      }
    })();
  });
  send({ event: 'ready' });
}

void main();
