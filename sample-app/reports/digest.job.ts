import { Injectable } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { DistributedLock, DistributedLockService } from 'nest-distributed-lock';

/**
 * A scheduled job that every replica fires: the `efficiency` lock lets one run it per tick and
 * the others skip (a busy scheduled job is skipped by default, and logged at debug level).
 */
/** The digest job's lock (under `sample:`, like every key of the sample that outlives a request: an operator's board filters by it). */
export const DIGEST = 'sample:digest';

@Injectable()
export class DigestJob {
  /** Start and end (epoch ms) of every run on this replica. */
  readonly runs: Array<{ startedAt: number; finishedAt: number }> = [];
  readonly skips: number[] = [];

  constructor(locks: DistributedLockService) {
    locks.events.on('busy', (event) => {
      if (event.key === DIGEST) this.skips.push(Math.floor(Date.now() / 1000));
    });
  }

  // ttl is the lockAtMostFor (a crashed replica frees the job after 5 s); lockAtLeastFor keeps
  // the lock 1.5 s after even a fast run, so a replica whose clock or timer is late cannot rerun the tick.
  @Cron('*/2 * * * * *')
  @DistributedLock({ purpose: 'efficiency', key: DIGEST, ttl: 5_000, lockAtLeastFor: 1_500 })
  async send(): Promise<void> {
    const startedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 300));
    this.runs.push({ startedAt, finishedAt: Date.now() });
  }
}
