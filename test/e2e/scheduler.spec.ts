import { Inject, Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Cron, Interval, ScheduleModule } from '@nestjs/schedule';
import { DistributedLock, DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { redisUrl, sleep, uniqueKey } from '../harness/lock-app.js';

const run = uniqueKey('sched');
type Record = { app: string; job: string; second: number };
const runs: Record[] = [];
const busy: Record[] = [];

@Injectable()
class Jobs {
  constructor(@Inject('APP_NAME') private readonly name: string) {}

  @DistributedLock({ purpose: 'efficiency', key: `${run}:above`, ttl: 5_000 })
  @Cron('* * * * * *')
  async lockAboveCron(): Promise<void> {
    runs.push({ app: this.name, job: 'above', second: Math.floor(Date.now() / 1000) });
    await sleep(300);
  }

  @Cron('* * * * * *')
  @DistributedLock({ purpose: 'efficiency', key: `${run}:below`, ttl: 5_000 })
  async lockBelowCron(): Promise<void> {
    runs.push({ app: this.name, job: 'below', second: Math.floor(Date.now() / 1000) });
    await sleep(300);
  }

  @Interval(400)
  @DistributedLock({ purpose: 'efficiency', key: `${run}:interval`, ttl: 5_000 })
  async interval(): Promise<void> {
    runs.push({ app: this.name, job: 'interval', second: 0 });
    await sleep(1_000);
  }

  @OnEvent('invoice.created')
  @DistributedLock({ purpose: 'efficiency', key: (payload: { id: string }) => `${run}:invoice:${payload.id}`, ttl: 5_000 })
  async onInvoice(payload: { id: string }): Promise<void> {
    runs.push({ app: this.name, job: `invoice:${payload.id}`, second: 0 });
    await sleep(200);
  }
}

async function startApp(name: string): Promise<INestApplicationContext> {
  @Module({
    imports: [ScheduleModule.forRoot(), EventEmitterModule.forRoot(), DistributedLockModule.forRoot({ redis: { url: redisUrl() } })],
    providers: [Jobs, { provide: 'APP_NAME', useValue: name }],
  })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  app.get(DistributedLockService).events.on('busy', (e) => {
    if (e.key.startsWith(run)) busy.push({ app: name, job: e.key.slice(run.length + 1), second: Math.floor(Date.now() / 1000) });
  });
  return app;
}

describe('@DistributedLock on @Cron, @Interval and @OnEvent methods in two application instances', () => {
  let apps: INestApplicationContext[];

  beforeAll(async () => {
    apps = [await startApp('A'), await startApp('B')];
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });

  it('fires in both instances, runs in one per tick, the other skips — decorator above or below @Cron', async () => {
    await sleep(3_600);
    for (const job of ['above', 'below']) {
      const jobRuns = runs.filter((r) => r.job === job);
      const jobBusy = busy.filter((r) => r.job === job);
      const ticks = new Set(jobRuns.map((r) => r.second));
      expect(ticks.size).toBeGreaterThanOrEqual(2);
      for (const second of ticks) expect(jobRuns.filter((r) => r.second === second)).toHaveLength(1);
      // Each tick, the instance that did not run skipped: it fired too.
      const skippedTicks = new Set(jobBusy.map((r) => r.second));
      for (const second of ticks) expect(skippedTicks.has(second)).toBe(true);
      expect(new Set([...jobRuns, ...jobBusy].map((r) => r.app))).toEqual(new Set(['A', 'B']));
    }
  });

  it('an @Interval job whose run outlasts its interval never runs twice at once', () => {
    const intervalRuns = runs.filter((r) => r.job === 'interval').length;
    const intervalSkips = busy.filter((r) => r.job === 'interval').length;
    expect(intervalRuns).toBeGreaterThanOrEqual(2);
    expect(intervalRuns).toBeLessThanOrEqual(5); // ≤ one per 1 s of work over ~3.6 s
    expect(intervalSkips).toBeGreaterThan(intervalRuns);
  });

  it('an event emitted in both instances is handled once', async () => {
    const id = uniqueKey('inv');
    await Promise.all(apps.map((app) => app.get(EventEmitter2).emitAsync('invoice.created', { id })));
    expect(runs.filter((r) => r.job === `invoice:${id}`)).toHaveLength(1);
    expect(busy.filter((r) => r.job === `invoice:${id}`)).toHaveLength(1);
  });
});
