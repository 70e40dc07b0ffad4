import { ConflictException, Controller, DefaultValuePipe, Get, Inject, Param, ParseIntPipe, Post, Query } from '@nestjs/common';
import { DistributedLock, DistributedLockService, LeaseLostError, StaleFencingTokenError } from 'nest-distributed-lock';
import { ACCOUNT_STORE, type AccountStore } from './account-store.js';

const instance = process.env.INSTANCE_NAME ?? `pid-${process.pid}`;
const workMs = Number(process.env.DEPOSIT_WORK_MS ?? 100);

export interface DepositResult {
  instance: string;
  account: string;
  /** The backend that granted the lock: etcd, or postgres with SAMPLE_BACKEND=postgres. */
  backend: string;
  token: string;
  balance: number;
}

/**
 * Money: two holders would corrupt the balance, so the lock's purpose is `correctness` (etcd or
 * PostgreSQL, with a fencing token), and the balance lives in a fenced store that refuses stale tokens.
 */
@Controller('accounts')
export class AccountsController {
  constructor(
    private readonly locks: DistributedLockService,
    @Inject(ACCOUNT_STORE) private readonly accounts: AccountStore,
  ) {}

  /** POST /accounts/:id/deposit?amount=10 — waits up to 10 s for the account's lock. */
  @Post(':id/deposit')
  @DistributedLock({ purpose: 'correctness', key: (id: string) => `account:${id}`, ttl: 1_500, wait: 10_000 })
  async deposit(@Param('id') id: string, @Query('amount', new DefaultValuePipe(1), ParseIntPipe) amount: number): Promise<DepositResult> {
    const lease = this.locks.current()!;
    const token = lease.token!;
    try {
      // A fenced read: it raises the account's fence to our token (read-modify-write safe).
      const balance = await this.accounts.read(id, token);
      await new Promise((resolve) => setTimeout(resolve, workMs)); // the "slow" part, where a GC pause can strike
      // The token travels with the write, and the resource decides: however late this write
      // arrives, it is refused if a newer holder has touched the account.
      await this.accounts.write(id, balance + amount, token);
      return { instance, account: id, backend: lease.backend, token: token.toString(), balance: balance + amount };
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
    return { account: id, ...(await this.accounts.show(id)) };
  }
}
