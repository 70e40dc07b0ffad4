import { Controller, Get } from '@nestjs/common';
import { DigestJob } from './digest.job.js';

@Controller('status')
export class StatusController {
  constructor(private readonly digest: DigestJob) {}

  /** Which ticks of the digest job this replica ran and which it skipped (unix seconds). */
  @Get()
  status(): { instance: string; digestRuns: DigestJob['runs']; digestSkips: number[] } {
    return { instance: process.env.INSTANCE_NAME ?? `pid-${process.pid}`, digestRuns: this.digest.runs, digestSkips: this.digest.skips };
  }
}
