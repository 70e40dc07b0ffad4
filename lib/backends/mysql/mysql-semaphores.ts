import type { AcquireRequest, AcquireResult, HeldLock } from '../lock-backend.interface.js';
import { permitsMismatch } from '../semaphore.util.js';
import { TurnWaiters } from '../wait-turn.util.js';
import type { MySqlQueryResult } from './mysql-client.interface.js';
import { bytes, firstRow, text } from './mysql-sql.util.js';
import type { MySqlStatements } from './mysql-statements.js';

export interface MySqlSemaphoresConfig {
  readonly sql: MySqlStatements;
  readonly heartbeatMs: number;
  /** This process's doorbell listener id (0: none now). */
  readonly listener: () => number;
  readonly call: (operation: string, key: string, sql: string, values: unknown[], cleanup?: () => void) => Promise<MySqlQueryResult>;
  /** Ring these listeners (a comma-separated list from a procedure), this process's own too. */
  readonly ring: (rings: unknown) => void;
}

/**
 * The MySQL backend's semaphores, requests with `permits` ≥ 2 (mysql-semaphore.sql.ts): every
 * operation one procedure CALL under the key's row lock. A waiter is told by mail ('!sem <owner>')
 * when a permit may be free and asks again; without a word it asks at its heartbeat (refreshing its
 * place), which also finds permits that ran out.
 */
export class MySqlSemaphores {
  readonly turns = new TurnWaiters();

  constructor(private readonly config: MySqlSemaphoresConfig) {}

  async acquire(request: AcquireRequest & { permits: number }): Promise<AcquireResult> {
    const { key, owner, ttlMs, queue, permits } = request;
    const { sql, heartbeatMs, listener, call } = this.config;
    if (queue) this.turns.track(owner);
    let row: Record<string, unknown>;
    try {
      row = firstRow(await call('acquire', key, sql.semAcquire, [bytes(key), bytes(owner), permits, Math.ceil(ttlMs), queue ? 1 : 0, heartbeatMs * 3, listener()], this.cleanup(key, owner)));
    } catch (error) {
      this.turns.forget(owner);
      throw error;
    }
    if (row.permits !== null && row.permits !== undefined) {
      this.turns.forget(owner);
      throw permitsMismatch(key, Number(row.permits), permits);
    }
    if (Number(row.acquired) === 1) {
      this.turns.forget(owner);
      return { acquired: true, token: BigInt(text(row.token)) };
    }
    if (!queue) this.turns.forget(owner);
    return { acquired: false, holderRemainingMs: row.holder_ms === null || row.holder_ms === undefined ? undefined : Number(row.holder_ms) };
  }

  waitForTurn(owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.turns.wait(owner, Math.min(timeoutMs, this.config.heartbeatMs), signal);
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    const row = firstRow(await this.config.call('extend', key, this.config.sql.semExtend, [bytes(key), bytes(owner), Math.ceil(ttlMs)]));
    return Number(row.held) === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    this.turns.forget(owner);
    const row = firstRow(await this.config.call('release', key, this.config.sql.semRelease, [bytes(key), bytes(owner)]));
    this.config.ring(row.rings);
    return Number(row.held) === 1;
  }

  async inspect(key: string): Promise<HeldLock | null> {
    const row = firstRow(await this.config.call('inspect', key, this.config.sql.semInspect, [bytes(key)]));
    if (row.token === undefined || row.token === null) return null;
    return { remainingMs: Number(row.remaining_ms), waiters: Number(row.waiters), token: BigInt(text(row.token)), permits: Number(row.permits), holders: Number(row.holders) };
  }

  /** Owners waiting in this process (see LockBackend.bookkeeping). */
  waitingOwners(): string[] {
    return this.turns.owners();
  }

  /** An acquire whose answer never came: an owner-checked release (and leaving the queue). */
  private cleanup(key: string, owner: string): () => void {
    return () => void this.release(key, owner).catch(() => undefined);
  }
}
