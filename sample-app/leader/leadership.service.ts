import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { DistributedLockService, type Lease } from 'nest-distributed-lock';

/** The name every replica campaigns for. */
export const LEADER = 'sample:leader';

/**
 * Leader election: every replica campaigns for one name; the one that leads keeps a lease
 * (renewed while its process runs, a token per term); when it loses it — paused past its ttl,
 * session gone, force-released — it campaigns again. Shutdown steps down at once: the next
 * replica in line leads without waiting for a ttl.
 */
@Injectable()
export class LeadershipService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(LeadershipService.name);
  private readonly stop = new AbortController();
  private term?: Lease;

  constructor(private readonly locks: DistributedLockService) {}

  /** This replica's current term, while it leads. */
  get leading(): Lease | undefined {
    return this.term && this.term.remainingMs() > 0 ? this.term : undefined;
  }

  onApplicationBootstrap(): void {
    void this.campaign();
  }

  onApplicationShutdown(): void {
    this.stop.abort();
  }

  private async campaign(): Promise<void> {
    while (!this.stop.signal.aborted) {
      try {
        // correctness: a token per term, so work done as leader can be fenced.
        const term = await this.locks.campaign(LEADER, { purpose: 'correctness', ttl: 3_000, signal: this.stop.signal });
        this.term = term;
        this.logger.log(`leading ${LEADER} (term token ${term.token})`);
        await new Promise((resolve) => term.signal.addEventListener('abort', resolve, { once: true }));
        this.logger.warn(`lost ${LEADER}: ${(term.signal.reason as Error).message}`);
      } catch (error) {
        if (this.stop.signal.aborted) return;
        this.logger.warn(`campaign failed, trying again in 1 s: ${(error as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  }
}
