// A throwaway Nest project's entry point, compiled against the packed tarball (ESM for Nest 12,
// CommonJS for Nest 11). Prints one JSON line with what happened; test/package/package.spec.ts checks it.
import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Controller, Injectable, Module, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { DistributedLock, DistributedLockModule, DistributedLockService, LockBusyError, MemoryBackend, PgFence } from 'nest-distributed-lock';
import { fromKysely } from 'nest-distributed-lock/orm';
import { CONFORMANCE_CHECKS, DistributedLockTestingModule, TestingLockBackend, verifyLockBackend } from 'nest-distributed-lock/testing';
import { DistributedLockBoardModule, type BoardView } from 'nest-distributed-lock/board';
// docs/samples/simple-redis.backend.ts, copied in: the "Writing a backend" sample, compiled against the packed types.
import { SimpleRedisBackend } from './simple-redis.backend.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const runs: Array<{ instance: string; second: number }> = [];
const prefix = `pkg-${process.pid}`;

@Injectable()
class DigestJob {
  instance = '';

  @Cron('* * * * * *')
  @DistributedLock({ purpose: 'efficiency', key: `${prefix}-digest`, lockAtLeastFor: 900 })
  async tick(): Promise<void> {
    runs.push({ instance: this.instance, second: Math.floor(Date.now() / 1000) });
  }
}

@Controller('work')
class WorkController {
  constructor(private readonly locks: DistributedLockService) {}

  @Post()
  @DistributedLock({ purpose: 'efficiency', key: `${prefix}-work` })
  async work(): Promise<{ held: boolean }> {
    await sleep(300);
    return { held: this.locks.current() !== undefined };
  }
}

function appModule(redisUrl: string) {
  @Module({
    imports: [ScheduleModule.forRoot(), DistributedLockModule.forRoot({ redis: { url: redisUrl } }), DistributedLockBoardModule.forRoot({ public: true })],
    controllers: [WorkController],
    providers: [DigestJob],
  })
  class AppModule {}
  return AppModule;
}

/**
 * The orm entry loads with no ORM installed, and a client it made for MySQL is refused by the
 * published PgFence before any statement (the handle is a stand-in: this project has no Kysely).
 */
async function ormEntry(): Promise<string> {
  const client = fromKysely({ executeQuery: async () => ({ rows: [] }), isTransaction: true }, 'mysql');
  return new PgFence({ table: 'accounts' }).read(client as never, 'x', 1n).then(
    () => 'accepted',
    (error: { name?: string; field?: string }) => `${error.name}:${error.field}`,
  );
}

async function testingEntry(): Promise<string> {
  @Injectable()
  class Billing {
    @DistributedLock({ purpose: 'efficiency', key: 'invoices' })
    async send(): Promise<string> {
      return 'sent';
    }
  }
  @Module({ imports: [DistributedLockTestingModule.forRoot()], providers: [Billing] })
  class TestModule {}
  const app = await NestFactory.createApplicationContext(TestModule, { logger: false });
  try {
    const release = await app.get(TestingLockBackend).occupy('invoices');
    const busy = await app.get(Billing).send().catch((e: unknown) => e);
    await release();
    return busy instanceof LockBusyError ? await app.get(Billing).send() : 'not busy';
  } finally {
    await app.close();
  }
}

/** The conformance suite from the packed testing entry, on the in-memory backend: how many checks, how many failed. */
async function conformance(): Promise<{ checks: number; passed: number; failed: string[] }> {
  const store = new MemoryBackend('pkg');
  const report = await verifyLockBackend({ create: () => store, ttlMs: 5_000, wakeWithinMs: 1_000 });
  return { checks: CONFORMANCE_CHECKS.length, passed: report.passed.length, failed: report.failed.map((f) => `${f.check}: ${f.reason}`) };
}

/** The sample backend of docs/backends/writing-a-backend.md, held to the packed suite as the page says: what failed, what was skipped. */
async function sample(redisUrl: string): Promise<{ failed: string[]; skipped: string[] }> {
  const report = await verifyLockBackend({ create: () => new SimpleRedisBackend({ url: redisUrl, prefix: `${prefix}-sample:` }), ttlMs: 5_000 });
  return { failed: report.failed.map((f) => `${f.check}: ${f.reason}`), skipped: report.skipped.sort() };
}

async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL!;
  const apps = await Promise.all(['a', 'b'].map(() => NestFactory.create(appModule(redisUrl), { logger: false })));
  const urls: string[] = [];
  for (const [i, app] of apps.entries()) {
    app.get(DigestJob).instance = i === 0 ? 'a' : 'b';
    await app.listen(0, '127.0.0.1');
    urls.push(`${await app.getUrl()}/work`);
  }
  const working = Promise.all(urls.map((url) => fetch(url, { method: 'POST' })));
  // The board entry: while one replica holds the work lock, the board lists it.
  await sleep(150);
  const view = (await (await fetch(urls[0].replace(/\/work$/, '/locks/api/locks'))).json()) as BoardView;
  const board = view.backends.flatMap((b) => b.locks.map((l) => `${b.name}:${l.key}`)).filter((k) => k.includes(`${prefix}-work`));
  const statuses = (await working).map((r) => r.status).sort();
  await sleep(3_600);
  await Promise.all(apps.map((app) => app.close()));
  const perSecond = new Map<number, number>();
  for (const run of runs) perSecond.set(run.second, (perSecond.get(run.second) ?? 0) + 1);
  console.log(
    JSON.stringify({
      nest: JSON.parse(readFileSync(join(process.cwd(), 'node_modules/@nestjs/core/package.json'), 'utf8')).version,
      statuses,
      runs: runs.length,
      maxRunsInOneSecond: Math.max(0, ...perSecond.values()),
      instances: [...new Set(runs.map((r) => r.instance))].sort(),
      testingEntry: await testingEntry(),
      ormEntry: await ormEntry(),
      conformance: await conformance(),
      sample: await sample(redisUrl),
      board,
    }),
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
