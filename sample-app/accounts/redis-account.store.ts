import type { RedisFence } from 'nest-distributed-lock';
import type { AccountStore } from './account-store.js';

/** Balances in a fenced Redis store (`RedisFence`), keyed `account:<id>`. */
export class RedisAccountStore implements AccountStore {
  constructor(private readonly fence: RedisFence) {}

  async read(id: string, token: bigint): Promise<number> {
    return Number((await this.fence.read(`account:${id}`, token)) ?? 0);
  }

  async write(id: string, balance: number, token: bigint): Promise<void> {
    await this.fence.write(`account:${id}`, String(balance), token);
  }

  async show(id: string): Promise<{ balance: number; fence?: string }> {
    const [balance, fence] = await Promise.all([this.fence.read(`account:${id}`), this.fence.fence(`account:${id}`)]);
    return { balance: Number(balance ?? 0), fence: fence?.toString() };
  }
}
