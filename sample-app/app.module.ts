import { Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import type { Redis } from 'ioredis';
import { DistributedLockModule, DistributedLockService, RedisFence } from 'nest-distributed-lock';
import { ACCOUNT_FENCE, AccountsController } from './accounts/accounts.controller.js';
import { RedisCloser, REDIS, redisProvider } from './redis.provider.js';
import { DigestJob } from './reports/digest.job.js';
import { ReportService } from './reports/report.service.js';
import { ReportsController } from './reports/reports.controller.js';
import { StatusController } from './reports/status.controller.js';

@Module({ providers: [redisProvider, RedisCloser], exports: [REDIS] })
class RedisModule {}

@Module({
  imports: [
    RedisModule,
    ScheduleModule.forRoot(),
    DistributedLockModule.forRootAsync({
      isGlobal: true,
      imports: [RedisModule],
      inject: [REDIS],
      useFactory: (redis: Redis) => ({
        redis: { client: redis }, // efficiency locks, on the application's own client
        etcd: {
          hosts: (process.env.ETCD_HOSTS ?? '127.0.0.1:2379').split(','), // correctness locks
          sessionTtlSeconds: Number(process.env.ETCD_SESSION_TTL ?? 10),
        },
        defaults: { ttl: 10_000, wait: 0 },
      }),
    }),
  ],
  controllers: [ReportsController, AccountsController, StatusController],
  providers: [
    ReportService,
    DigestJob,
    {
      provide: ACCOUNT_FENCE,
      inject: [REDIS, DistributedLockService],
      useFactory: (redis: Redis, locks: DistributedLockService) => new RedisFence(redis, { leases: locks, keyPrefix: 'sample:' }),
    },
  ],
})
export class AppModule {}
