import { DistributedLockError } from '../errors/distributed-lock.error.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { StaleFencingTokenError } from '../errors/stale-fencing-token.error.js';
import { fenceToken, type LeaseSource } from './fence-token.util.js';

/** A `pg` Client, PoolClient or Pool — anything with `query(text, values)`. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

export interface PgFenceOptions {
  /** The guarded table. */
  table: string;
  /** Its key column. @default 'id' */
  idColumn?: string;
  /** A `bigint NOT NULL DEFAULT 0` column holding the highest token seen. @default 'fence' */
  fenceColumn?: string;
  /** Supplies the token when a call passes none: the service's `current()` lease. */
  leases?: LeaseSource;
}

/** Quote an SQL identifier (a table may be schema-qualified: `billing.accounts`). */
function quoteIdent(name: unknown, field: string): string {
  if (typeof name !== 'string' || name.length === 0) throw new InvalidLockOptionsError(field, 'must be a non-empty identifier', 'PgFence');
  return name
    .split('.')
    .map((part) => `"${part.replace(/"/g, '""')}"`)
    .join('.');
}

/**
 * The SQL guard for a resource in PostgreSQL. The table keeps a `fence` column: the highest
 * token any fenced statement has shown the row. Statements run in the caller's transaction
 * (pass the client you began it on):
 *
 * ```sql
 * UPDATE accounts SET balance = $2, fence = $3 WHERE id = $1 AND fence <= $3   -- update()
 * UPDATE accounts SET fence = $2 WHERE id = $1 AND fence <= $2 RETURNING *      -- read()
 * ```
 *
 * No row matched while the row exists: a newer holder got there first — `StaleFencingTokenError`,
 * nothing changed. An equal token is the same holder. `read()` raises the fence, so a superseded
 * holder cannot write back a value computed from what it read.
 */
export class PgFence {
  private readonly table: string;
  private readonly id: string;
  private readonly fence: string;

  constructor(private readonly options: PgFenceOptions) {
    this.table = quoteIdent(options.table, 'table');
    this.id = quoteIdent(options.idColumn ?? 'id', 'idColumn');
    this.fence = quoteIdent(options.fenceColumn ?? 'fence', 'fenceColumn');
  }

  /** Set `values` on the row if `token` (default: the current lease's) is not older than its fence. */
  async update(db: PgQueryable, id: unknown, values: Record<string, unknown>, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `PgFence.update(${this.options.table}, ${String(id)})`;
    const fenced = fenceToken(token, this.options.leases, where);
    const columns = Object.keys(values ?? {});
    if (columns.length === 0) throw new InvalidLockOptionsError('values', 'must set at least one column', where);
    const sets = columns.map((column, i) => `${quoteIdent(column, 'values')} = $${i + 3}`);
    const result = await db.query(
      `UPDATE ${this.table} SET ${sets.join(', ')}, ${this.fence} = $2::bigint WHERE ${this.id} = $1 AND ${this.fence} <= $2::bigint RETURNING *`,
      [id, fenced.toString(), ...columns.map((c) => values[c])],
    );
    if (result.rowCount === 1) return result.rows[0];
    throw await this.refusal(db, id, fenced, where);
  }

  /** Read the row through the fence: raises it to `token`; a stale token throws. */
  async read(db: PgQueryable, id: unknown, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `PgFence.read(${this.options.table}, ${String(id)})`;
    const fenced = fenceToken(token, this.options.leases, where);
    const result = await db.query(
      `UPDATE ${this.table} SET ${this.fence} = $2::bigint WHERE ${this.id} = $1 AND ${this.fence} <= $2::bigint RETURNING *`,
      [id, fenced.toString()],
    );
    if (result.rowCount === 1) return result.rows[0];
    throw await this.refusal(db, id, fenced, where);
  }

  /** Why no row matched: a newer token (stale) or no such row. */
  private async refusal(db: PgQueryable, id: unknown, token: bigint, where: string): Promise<Error> {
    const row = await db.query(`SELECT ${this.fence} AS fence FROM ${this.table} WHERE ${this.id} = $1`, [id]);
    if (row.rowCount === 0) return new DistributedLockError(`${where}: no row with ${this.options.idColumn ?? 'id'} = ${String(id)}`);
    return new StaleFencingTokenError(`${this.options.table}:${String(id)}`, token, BigInt(String(row.rows[0].fence)));
  }
}
