import { Module, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { sleep, uniqueKey } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';

/** Collects what the application logs, by level. */
class Collector implements LoggerService {
  readonly lines: Array<{ level: string; message: string }> = [];
  log(message: unknown): void {
    this.lines.push({ level: 'log', message: String(message) });
  }
  error(message: unknown): void {
    this.lines.push({ level: 'error', message: String(message) });
  }
  warn(message: unknown): void {
    this.lines.push({ level: 'warn', message: String(message) });
  }
  debug(): void {}
  verbose(): void {}
}

describe('Redis outages in the log: once per outage, never an unhandled ioredis error event', () => {
  it('two outages with many reconnects: one warning each (no credentials), one recovery line each', async () => {
    const server = await RedisServer.start();
    const collector = new Collector();
    const stderr: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      stderr.push(String(chunk));
      return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    }) as typeof process.stderr.write;
    const originalError = console.error;
    console.error = (...args: unknown[]) => void stderr.push(args.map(String).join(' '));
    @Module({
      imports: [
        DistributedLockModule.forRoot({
          redis: { url: server.url.replace('redis://', 'redis://:hunter2@'), connectTimeoutMs: 300, commandTimeoutMs: 300 },
        }),
      ],
    })
    class AppModule {}
    // A password the server does not require: ioredis warns but connects.
    const app = await NestFactory.createApplicationContext(AppModule, { logger: collector, abortOnError: false });
    try {
      const locks = app.get(DistributedLockService);
      const key = uniqueKey('outage-log');
      const held = await locks.acquire(key, { purpose: 'efficiency' });
      // A waiter opens the wake-up connection too.
      const waiter = locks.acquire(key, { purpose: 'efficiency', wait: 200 }).catch(() => undefined);
      await waiter;
      await held.release();
      for (let outage = 0; outage < 2; outage++) {
        await server.kill9();
        for (let i = 0; i < 4; i++) {
          await sleep(300);
          await locks.tryAcquire(uniqueKey('during'), { purpose: 'efficiency' }).catch(() => undefined);
        }
        await server.restart();
        const deadline = Date.now() + 10_000;
        for (;;) {
          const lease = await locks.tryAcquire(uniqueKey('after'), { purpose: 'efficiency' }).catch(() => undefined);
          if (lease) {
            await lease.release();
            break;
          }
          if (Date.now() > deadline) throw new Error('Redis did not come back');
          await sleep(100);
        }
        await sleep(200);
      }
      const ours = collector.lines.filter((l) => /redis/i.test(l.message) && /connection/i.test(l.message));
      const warnings = ours.filter((l) => l.level === 'warn');
      const recoveries = ours.filter((l) => l.level === 'log');
      expect(warnings.length).toBe(2);
      expect(recoveries.length).toBe(2);
      expect(collector.lines.map((l) => l.message).join('\n')).not.toContain('hunter2');
      expect(stderr.join('')).not.toMatch(/Unhandled error event/);
    } finally {
      process.stderr.write = write;
      console.error = originalError;
      await app.close();
      await server.stop();
    }
  }, 60_000);
});
