/** Where the balances live: a store that checks the lock's fencing token on every read and write. */
export interface AccountStore {
  /** Fenced read: raises the account's fence to `token` (so an older holder can no longer write). */
  read(id: string, token: bigint): Promise<number>;
  /** Fenced write: `StaleFencingTokenError`, nothing changed, if a newer token has touched the account. */
  write(id: string, balance: number, token: bigint): Promise<void>;
  /** The balance and the fence, unfenced (for GET /accounts/:id). */
  show(id: string): Promise<{ balance: number; fence?: string }>;
}

export const ACCOUNT_STORE = Symbol('ACCOUNT_STORE');
