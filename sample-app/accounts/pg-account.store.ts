import type { OnModuleInit } from '@nestjs/common';
import type { Pool } from 'pg';
import { PgFence } from 'nest-distributed-lock';
import type { AccountStore } from './account-store.js';

/**
 * Balances in a PostgreSQL table guarded by `PgFence` — the same database that issues the tokens.
 * Each statement commits on its own, as the Redis store's commands do: the demo freezes a holder
 * between its read and its write, and a frozen holder inside an open transaction would keep the row
 * locked (the next holder would wait for it instead of overtaking it). The fence, not a row lock,
 * keeps the frozen holder's late write out. (Without such pauses, one transaction is the better
 * shape: README, "Fencing with the PostgreSQL backend".)
 */
export class PgAccountStore implements AccountStore, OnModuleInit {
  private readonly fence = new PgFence({ table: 'sample_accounts' });

  constructor(private readonly pool: Pool) {}

  /** Create the table once, whichever replica starts first (DDL is not safe to run concurrently). */
  async onModuleInit(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SELECT pg_advisory_xact_lock(hashtext('sample_accounts'))");
      await client.query('CREATE TABLE IF NOT EXISTS sample_accounts (id text PRIMARY KEY, balance bigint NOT NULL DEFAULT 0, fence bigint NOT NULL DEFAULT 0)');
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  }

  async read(id: string, token: bigint): Promise<number> {
    await this.pool.query('INSERT INTO sample_accounts (id) VALUES ($1) ON CONFLICT (id) DO NOTHING', [id]);
    return Number((await this.fence.read(this.pool, id, token)).balance);
  }

  async write(id: string, balance: number, token: bigint): Promise<void> {
    await this.fence.update(this.pool, id, { balance }, token);
  }

  async show(id: string): Promise<{ balance: number; fence?: string }> {
    const { rows } = await this.pool.query('SELECT balance, fence FROM sample_accounts WHERE id = $1', [id]);
    return rows.length === 0 ? { balance: 0 } : { balance: Number(rows[0].balance), fence: String(rows[0].fence) };
  }
}
