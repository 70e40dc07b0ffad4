import { Module } from '@nestjs/common';
import { DistributedLockModule } from 'nest-distributed-lock';
import { ReportService } from './reports/report.service.js';
import { ReportsController } from './reports/reports.controller.js';

@Module({
  imports: [
    DistributedLockModule.forRootAsync({
      isGlobal: true,
      useFactory: () => ({
        redis: { url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
        defaults: { ttl: 10_000, wait: 0 },
      }),
    }),
  ],
  controllers: [ReportsController],
  providers: [ReportService],
})
export class AppModule {}
