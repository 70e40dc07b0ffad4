import { Injectable } from '@nestjs/common';
import { DistributedLockService } from 'nest-distributed-lock';

export interface ReportRun {
  instance: string;
  report: string;
  startedAt: number;
  finishedAt: number;
}

/**
 * Building a report twice is wasteful, not harmful: an `efficiency` lock on Redis is the right
 * tool. If a rare double run would corrupt something, the purpose would be `correctness`.
 */
@Injectable()
export class ReportService {
  private readonly instance = process.env.INSTANCE_NAME ?? `pid-${process.pid}`;
  private readonly workMs = Number(process.env.REPORT_WORK_MS ?? 200);

  constructor(private readonly locks: DistributedLockService) {}

  /** Runs once across all replicas at a time; `wait` = how long to queue behind another replica. */
  build(report: string, wait: number): Promise<ReportRun> {
    return this.locks.using(`report:${report}`, { purpose: 'efficiency', ttl: 10_000, wait }, async (lease) => {
      const startedAt = Date.now();
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, this.workMs);
        // Stop working the moment the lease is lost: someone else may be running by now.
        lease.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(lease.signal.reason);
        });
      });
      return { instance: this.instance, report, startedAt, finishedAt: Date.now() };
    });
  }
}
