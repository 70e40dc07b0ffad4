import { Inject, Injectable, Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitter2, EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Cron, Interval, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { DistributedLock, DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { redisUrl, sleep, uniqueKey } from '../harness/lock-app.js';

const run = uniqueKey('sched');
/** One firing of a job in one instance: `second` is the cron tick it belongs to (0 for non-cron jobs). */
type Record = { app: string; job: string; second: number };
const runs: Record[] = [];
const busy: Record[] = [];
/** Each @Interval run, with its start and end on this process's monotonic clock (both apps share it). */
const intervalRuns: { app: string; start: number; end: number }[] = [];
/** Job bodies executing right now, in either instance. */
let inFlight = 0;

// A cron job fires at (never before: `cron` re-arms an early timer) the second boundary, so
// floor(now / 1 s), taken as the body starts or the skip is reported a round trip later, is the tick.
const tickNow = (): number => Math.floor(Date.now() / 1000);

@Injectable()
class Jobs {
  constructor(@Inject('APP_NAME') private readonly name: string) {}

  @DistributedLock({ purpose: 'efficiency', key: `${run}:above`, ttl: 5_000 })
  @Cron('* * * * * *')
  async lockAboveCron(): Promise<void> {
    runs.push({ app: this.name, job: 'above', second: tickNow() });
    inFlight += 1;
    await sleep(300).finally(() => (inFlight -= 1));
  }

  @Cron('* * * * * *')
  @DistributedLock({ purpose: 'efficiency', key: `${run}:below`, ttl: 5_000 })
  async lockBelowCron(): Promise<void> {
    runs.push({ app: this.name, job: 'below', second: tickNow() });
    inFlight += 1;
    await sleep(300).finally(() => (inFlight -= 1));
  }

  @Interval(400)
  @DistributedLock({ purpose: 'efficiency', key: `${run}:interval`, ttl: 5_000 })
  async interval(): Promise<void> {
    inFlight += 1;
    const start = performance.now();
    await sleep(1_000).finally(() => {
      intervalRuns.push({ app: this.name, start, end: performance.now() });
      inFlight -= 1;
    });
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
    if (e.key.startsWith(run)) busy.push({ app: name, job: e.key.slice(run.length + 1), second: tickNow() });
  });
  return app;
}

/** Stop every @Cron and @Interval of an app (what app.close() does first), keeping its lock service and events up. */
function stopSchedulers(app: INestApplicationContext): void {
  const registry = app.get(SchedulerRegistry);
  for (const job of registry.getCronJobs().values()) void job.stop();
  for (const name of registry.getIntervals()) registry.deleteInterval(name);
}

/** Wait until no job body runs and no run or skip has been reported for 500 ms (in-flight acquisitions have answered). */
async function settle(): Promise<void> {
  const seen = (): number => runs.length + busy.length + intervalRuns.length;
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
    const before = seen();
    await sleep(500);
    if (inFlight === 0 && seen() === before) return;
  }
  throw new Error(`the stopped jobs did not settle: ${inFlight} still running`);
}

describe('@DistributedLock on @Cron, @Interval and @OnEvent methods in two application instances', () => {
  let apps: INestApplicationContext[];
  /** Both instances' schedulers are running from here (epoch ms)... */
  let bothUp: number;
  /** ...until here, when both were stopped (synchronously, together). */
  let stoppedAt: number;

  beforeAll(async () => {
    apps = [await startApp('A'), await startApp('B')];
    bothUp = Date.now();
    await sleep(3_600);
    stoppedAt = Date.now();
    for (const app of apps) stopSchedulers(app);
    await settle();
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });

  it('fires in both instances, runs in one per tick, the other skips — decorator above or below @Cron', () => {
    // The ticks both instances fired in full: after the second one started (a tick while B was
    // still booting fires in A alone) and at least 500 ms before the stop (a tick racing the stop
    // may have fired in one instance only). Everything they started has been reported (settle()).
    const complete = (second: number): boolean => second * 1000 > bothUp && second * 1000 + 500 <= stoppedAt;
    for (const job of ['above', 'below']) {
      const jobRuns = runs.filter((r) => r.job === job);
      const jobBusy = busy.filter((r) => r.job === job);
      // Never two runs in one tick, whatever the tick.
      for (const second of new Set(jobRuns.map((r) => r.second))) expect(jobRuns.filter((r) => r.second === second)).toHaveLength(1);
      const ticks = [...new Set([...jobRuns, ...jobBusy].map((r) => r.second))].filter(complete);
      expect(ticks.length).toBeGreaterThanOrEqual(2); // ~3 in the ~3.1 s window
      for (const second of ticks) {
        // Each complete tick: exactly one instance ran, and the other fired too and skipped.
        const ran = jobRuns.filter((r) => r.second === second);
        const skipped = jobBusy.filter((r) => r.second === second);
        expect({ second, ran: ran.length, skipped: skipped.length }).toEqual({ second, ran: 1, skipped: 1 });
        expect(skipped[0].app).not.toBe(ran[0].app);
      }
      expect(new Set([...jobRuns, ...jobBusy].map((r) => r.app))).toEqual(new Set(['A', 'B']));
    }
  });

  it('an @Interval job whose run outlasts its interval never runs twice at once', () => {
    const intervalSkips = busy.filter((r) => r.job === 'interval').length;
    expect(intervalRuns.length).toBeGreaterThanOrEqual(2); // ~3-4 one-second runs in ~3.6 s
    // Never two at once, in either instance: each run starts after the previous one ended.
    const ordered = [...intervalRuns].sort((a, b) => a.start - b.start);
    for (let i = 1; i < ordered.length; i += 1) expect(ordered[i].start).toBeGreaterThanOrEqual(ordered[i - 1].end);
    // Both instances fire every 400 ms and find the 1 s run under way: far more skips than runs.
    expect(intervalSkips).toBeGreaterThan(intervalRuns.length);
  });

  it('an event emitted in both instances is handled once', async () => {
    const id = uniqueKey('inv');
    await Promise.all(apps.map((app) => app.get(EventEmitter2).emitAsync('invoice.created', { id })));
    expect(runs.filter((r) => r.job === `invoice:${id}`)).toHaveLength(1);
    expect(busy.filter((r) => r.job === `invoice:${id}`)).toHaveLength(1);
  });
});
