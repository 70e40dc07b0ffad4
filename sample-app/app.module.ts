import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { DistributedLockBoardModule } from 'nest-distributed-lock/board';
import { AccountsController } from './accounts/accounts.controller.js';
import { DemoTokenGuard } from './board/demo-token.guard.js';
import { PostgresLocksModule } from './backends/postgres.module.js';
import { RedisEtcdLocksModule } from './backends/redis-etcd.module.js';
import { LeadershipService } from './leader/leadership.service.js';
import { SweepJob } from './leader/sweep.job.js';
import { DigestJob } from './reports/digest.job.js';
import { ReportService } from './reports/report.service.js';
import { ReportsController } from './reports/reports.controller.js';
import { StatusController } from './reports/status.controller.js';

/**
 * SAMPLE_BACKEND=postgres runs every lock on PostgreSQL alone (DATABASE_URL); otherwise Redis
 * (REDIS_URL) for efficiency and etcd (ETCD_HOSTS) for correctness. The controllers and jobs are
 * the same either way: they name a purpose, not a backend.
 */
const backends = { postgres: PostgresLocksModule, 'redis-etcd': RedisEtcdLocksModule };
const chosen = process.env.SAMPLE_BACKEND || 'redis-etcd';
if (!(chosen in backends)) throw new Error(`SAMPLE_BACKEND must be one of ${Object.keys(backends).join(', ')}, got "${chosen}"`);
const locks = backends[chosen as keyof typeof backends];

@Module({
  // The lock board at /locks: behind the demo guard, with the force-release button.
  imports: [locks, ScheduleModule.forRoot(), DistributedLockBoardModule.forRoot({ guard: DemoTokenGuard, readOnly: false })],
  controllers: [ReportsController, AccountsController, StatusController],
  providers: [ReportService, DigestJob, LeadershipService, SweepJob],
})
export class AppModule {}
