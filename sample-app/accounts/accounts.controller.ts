import { ConflictException, Controller, DefaultValuePipe, Get, Inject, Param, ParseIntPipe, Post, Query } from '@nestjs/common';
import { DistributedLock, DistributedLockService, LeaseLostError, RedisFence, StaleFencingTokenError } from 'nest-distributed-lock';

export const ACCOUNT_FENCE = Symbol('ACCOUNT_FENCE');

const instance = process.env.INSTANCE_NAME ?? `pid-${process.pid}`;
const workMs = Number(process.env.DEPOSIT_WORK_MS ?? 100);

export interface DepositResult {
  instance: string;
  account: string;
  token: string;
  balance: number;
}

/**
 * Money: two holders would corrupt the balance, so the lock's purpose is `correctness` (etcd,
 * with a fencing token), and the balance lives in a fenced store that refuses stale tokens.
 */
@Controller('accounts')
export class AccountsController {
  constructor(
    private readonly locks: DistributedLockService,
    @Inject(ACCOUNT_FENCE) private readonly fence: RedisFence,
  ) {}

  /** POST /accounts/:id/deposit?amount=10 — waits up to 10 s for the account's lock. */
  @Post(':id/deposit')
  @DistributedLock({ purpose: 'correctness', key: (id: string) => `account:${id}`, ttl: 1_500, wait: 10_000 })
  async deposit(@Param('id') id: string, @Query('amount', new DefaultValuePipe(1), ParseIntPipe) amount: number): Promise<DepositResult> {
    const token = this.locks.current()!.token!;
    try {
      // A fenced read: it raises the account's fence to our token (read-modify-write safe).
      const balance = Number((await this.fence.read(`account:${id}`, token)) ?? 0);
      await new Promise((resolve) => setTimeout(resolve, workMs)); // the "slow" part, where a GC pause can strike
      // The token travels with the write, and the resource decides: however late this write
      // arrives, it is refused if a newer holder has touched the account.
      await this.fence.write(`account:${id}`, String(balance + amount), token);
      return { instance, account: id, token: token.toString(), balance: balance + amount };
    } catch (error) {
      if (error instanceof StaleFencingTokenError || error instanceof LeaseLostError) {
        throw new ConflictException({
          statusCode: 409,
          error: 'Conflict',
          rejected: error instanceof StaleFencingTokenError ? 'stale-token' : 'lease-lost',
          instance,
          token: token.toString(),
          message: error.message,
        });
      }
      throw error;
    }
  }

  @Get(':id')
  async balance(@Param('id') id: string): Promise<{ account: string; balance: number; fence?: string }> {
    const [balance, fence] = await Promise.all([this.fence.read(`account:${id}`), this.fence.fence(`account:${id}`)]);
    return { account: id, balance: Number(balance ?? 0), fence: fence?.toString() };
  }
}
