import { Injectable } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { LeadershipService } from './leadership.service.js';

/**
 * A `@Cron` job that only the leader runs: every replica's scheduler fires it, the followers
 * return at once. Each run records the term it ran under, so terms can be seen never to overlap.
 */
@Injectable()
export class SweepJob {
  readonly runs: Array<{ at: number; term: string }> = [];

  constructor(private readonly leadership: LeadershipService) {}

  @Cron('* * * * * *')
  sweep(): void {
    const term = this.leadership.leading;
    // remainingMs(), not only the signal: after a pause (a GC, SIGSTOP) this tick may run before
    // the timer that aborts the signal — the clock already says the term is over.
    if (!term || term.remainingMs() <= 0) return;
    this.runs.push({ at: Date.now(), term: String(term.token) });
  }
}
