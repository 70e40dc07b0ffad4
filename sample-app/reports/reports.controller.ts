import { ConflictException, Controller, Param, ParseIntPipe, Post, Query, ServiceUnavailableException, DefaultValuePipe } from '@nestjs/common';
import { LockBackendUnavailableError, LockBusyError } from 'nest-distributed-lock';
import { ReportService, type ReportRun } from './report.service.js';

@Controller('reports')
export class ReportsController {
  constructor(private readonly reports: ReportService) {}

  /** POST /reports/daily?wait=0 — 201 with the run, or 409 while another replica builds it. */
  @Post(':name')
  async build(@Param('name') name: string, @Query('wait', new DefaultValuePipe(0), ParseIntPipe) wait: number): Promise<ReportRun> {
    try {
      return await this.reports.build(name, wait);
    } catch (error) {
      // The decorator's interceptor will do this mapping for you (issue "decorator").
      if (error instanceof LockBusyError) throw new ConflictException({ message: error.message, key: error.key });
      if (error instanceof LockBackendUnavailableError) throw new ServiceUnavailableException(error.message);
      throw error;
    }
  }
}
