import { Controller, Get } from '@nestjs/common';
import { DistributedLockService, type LockInfo } from 'nest-distributed-lock';
import { LEADER } from '../leader/leadership.service.js';
import { SweepJob } from '../leader/sweep.job.js';
import { DIGEST, DigestJob } from './digest.job.js';

/** A LockInfo as JSON (its token is a bigint). */
const plain = (info: LockInfo | null) => (info ? { ...info, token: info.token?.toString() } : null);

@Controller('status')
export class StatusController {
  constructor(
    private readonly digest: DigestJob,
    private readonly sweep: SweepJob,
    private readonly locks: DistributedLockService,
  ) {}

  /** Which ticks of the digest job this replica ran and skipped (unix seconds); the leader-only sweep's runs. */
  @Get()
  status(): { instance: string; digestRuns: DigestJob['runs']; digestSkips: number[]; sweepRuns: SweepJob['runs'] } {
    return { instance: process.env.INSTANCE_NAME ?? `pid-${process.pid}`, digestRuns: this.digest.runs, digestSkips: this.digest.skips, sweepRuns: this.sweep.runs };
  }

  /** The application's locks as their backends see them now (any replica's holds): `inspect()`. */
  @Get('locks')
  async locksNow(): Promise<Record<string, ReturnType<typeof plain>>> {
    const [digest, leader] = await Promise.all([
      this.locks.inspect(DIGEST, { purpose: 'efficiency' }),
      this.locks.inspect(LEADER, { purpose: 'correctness' }),
    ]);
    return { digest: plain(digest), [LEADER]: plain(leader) };
  }
}
