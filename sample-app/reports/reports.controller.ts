import { Controller, DefaultValuePipe, Param, ParseIntPipe, Post, Query, UseInterceptors } from '@nestjs/common';
import { DistributedLockInterceptor } from 'nest-distributed-lock';
import { ReportService, type ReportRun } from './report.service.js';

/**
 * No decorator here: the service takes the lock with `using()`. The interceptor still turns its
 * `LockBusyError` into 409 Conflict (and `LockBackendUnavailableError` into 503).
 */
@Controller('reports')
@UseInterceptors(DistributedLockInterceptor)
export class ReportsController {
  constructor(private readonly reports: ReportService) {}

  /** POST /reports/daily?wait=0 — 201 with the run, or 409 while another replica builds it. */
  @Post(':name')
  build(@Param('name') name: string, @Query('wait', new DefaultValuePipe(0), ParseIntPipe) wait: number): Promise<ReportRun> {
    return this.reports.build(name, wait);
  }
}
