// Round 3, defect 4: the `Leadership` provider of docs/guide/leader-election.md (it was the README's),
// in a Nest application of its own process. Prints "leading" once inspect() shows the name held,
// and the provider's term is held (its campaign() resolved), then "closing", then — if app.close() ever returns — "closed in <ms> ms" and exits.
// The parent (test/integration/readme-leadership-example.spec.ts) kills this process
// by its PID when "closed in" does not come: a close() that never returns spins in microtasks,
// and no timer of this process would ever fire.
//
// Env: WORKER_LOCK_OPTIONS (JSON module options: one backend), WORKER_BACKEND (its name),
// WORKER_PURPOSE ('correctness', or 'efficiency' for Redis, which serves no correctness locks),
// WORKER_LEADER_NAME (a name of its own per run; the page's is 'billing-leader').
import { Injectable, Module, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { DistributedLockModule, DistributedLockService, type Lease, type LockPurpose } from '../../lib/index.js';

const BACKEND = process.env.WORKER_BACKEND!;
const PURPOSE = (process.env.WORKER_PURPOSE ?? 'correctness') as LockPurpose;
const LEADER_NAME = process.env.WORKER_LEADER_NAME ?? 'billing-leader';

// The page's class body, as written — but for the name and purpose, read from the environment
// ('billing-leader' and 'correctness' on the page).
@Injectable()
export class Leadership implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly stop = new AbortController();
  private term?: Lease;

  constructor(private readonly locks: DistributedLockService) {}

  onApplicationBootstrap(): void {
    void this.lead();
  }

  onApplicationShutdown(): void {
    this.stop.abort();
  }

  private async lead(): Promise<void> {
    while (!this.stop.signal.aborted) {
      // Waits until this replica leads; the term's token grows with every new term.
      this.term = await this.locks.campaign(LEADER_NAME, { purpose: PURPOSE, ttl: 5_000, signal: this.stop.signal }).catch(() => undefined);
      if (this.term) await new Promise((lost) => this.term!.signal.addEventListener('abort', lost, { once: true }));
    }
  }

  @Cron('*/10 * * * * *')
  async settle(): Promise<void> {
    // remainingMs(), not only the signal: a tick that runs right after a pause comes before the timer.
    if (!this.term || this.term.remainingMs() <= 0) return;
    // … work only the leader does; write with this.term.token through a fence.
  }
}

async function main(): Promise<void> {
  @Module({ imports: [ScheduleModule.forRoot(), DistributedLockModule.forRoot(JSON.parse(process.env.WORKER_LOCK_OPTIONS!))], providers: [Leadership] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  await app.init();
  const locks = app.get(DistributedLockService);
  // Leading: the provider holds its term (campaign() resolved), and the backend shows the name held.
  const leads = (): boolean => ((app.get(Leadership) as unknown as { term?: Lease }).term?.remainingMs() ?? 0) > 0;
  const deadline = Date.now() + 20_000;
  while (!leads() || !(await locks.inspect(LEADER_NAME, { backend: BACKEND }))) {
    if (Date.now() > deadline) throw new Error(`not leading ${LEADER_NAME} within 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  process.stdout.write('leading\n');
  process.stdout.write('closing\n');
  const started = performance.now();
  await app.close();
  process.stdout.write(`closed in ${Math.round(performance.now() - started)} ms\n`);
  process.exit(0);
}

main().catch((error: unknown) => {
  process.stdout.write(`failed: ${(error as Error)?.message ?? String(error)}\n`);
  process.exit(1);
});
