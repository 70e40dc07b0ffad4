import { refuseOtherDialect } from '../common/sql-dialect.js';
import { DistributedLockError } from '../errors/distributed-lock.error.js';
import { StaleFencingTokenError } from '../errors/stale-fencing-token.error.js';
import type { LeaseSource } from './fence-token.util.js';
import { columnsToSet, quoteIdentifier, sqlFenceToken } from './sql-fence.util.js';

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
  /** Supplies the token when a call passes none: the service (`leases: locks`). */
  leases?: LeaseSource;
  /**
   * The lock key that protects a row, for implicit tokens — e.g. `(id) => \`account:${id}\``: the
   * token is taken only from the lease on that key. Without it, pass the token to every call.
   */
  lockKey?: (id: unknown) => string;
}

const quoteIdent = (name: unknown, field: string, qualified = false): string => quoteIdentifier(name, field, 'PgFence', '"', qualified);

/**
 * The SQL guard for a resource in PostgreSQL. The table keeps a `fence` column: the highest
 * token any fenced statement has shown the row. Statements run in the caller's transaction
 * (pass the client you began it on):
 *
 * ```sql
 * UPDATE accounts SET balance = $3, fence = $2
 *  WHERE id = $1 AND COALESCE(fence, 0) <= $2
 *    AND (SELECT count(*) FROM accounts WHERE id = $1) = 1 RETURNING *        -- update()
 * UPDATE accounts SET fence = $2 WHERE … (the same guard) RETURNING *          -- read()
 * ```
 *
 * No row matched while the row exists: a newer holder got there first — `StaleFencingTokenError`,
 * nothing changed. An equal token is the same holder. `read()` raises the fence, so a superseded
 * holder cannot write back a value computed from what it read. A NULL fence is a row no token has
 * touched yet (as 0). An id that matches several rows changes nothing and is reported: the guard
 * is per row, so the id column must be unique.
 */
export class PgFence {
  private readonly table: string;
  private readonly id: string;
  private readonly fence: string;

  constructor(private readonly options: PgFenceOptions) {
    this.table = quoteIdent(options.table, 'table', true);
    this.id = quoteIdent(options.idColumn ?? 'id', 'idColumn');
    this.fence = quoteIdent(options.fenceColumn ?? 'fence', 'fenceColumn');
  }

  /** Set `values` on the row if `token` (default: the current lease's) is not older than its fence. */
  async update(db: PgQueryable, id: unknown, values: Record<string, unknown>, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `PgFence.update(${this.options.table}, ${String(id)})`;
    refuseOtherDialect(db, 'postgres', 'db', where);
    const fenced = this.tokenFor(token, where, id);
    const columns = columnsToSet(values, this.options.fenceColumn ?? 'fence', where);
    const sets = columns.map((column, i) => `${quoteIdent(column, 'values')} = $${i + 3}`);
    const result = await db.query(
      `UPDATE ${this.table} SET ${sets.join(', ')}, ${this.fence} = $2::bigint WHERE ${this.guard()} RETURNING *`,
      [id, fenced.toString(), ...columns.map((c) => values[c])],
    );
    if (result.rowCount === 1) return result.rows[0];
    throw await this.refusal(db, id, fenced, where);
  }

  /** Read the row through the fence: raises it to `token`; a stale token throws. */
  async read(db: PgQueryable, id: unknown, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `PgFence.read(${this.options.table}, ${String(id)})`;
    refuseOtherDialect(db, 'postgres', 'db', where);
    const fenced = this.tokenFor(token, where, id);
    const result = await db.query(`UPDATE ${this.table} SET ${this.fence} = $2::bigint WHERE ${this.guard()} RETURNING *`, [id, fenced.toString()]);
    if (result.rowCount === 1) return result.rows[0];
    throw await this.refusal(db, id, fenced, where);
  }

  private tokenFor(token: bigint | number | undefined, where: string, id: unknown): bigint {
    return sqlFenceToken(token, this.options, where, id, "PostgreSQL's bigint");
  }

  /** One row with this id ($1) whose fence ($2) is not newer; NULL counts as never fenced. */
  private guard(): string {
    return (
      `${this.id} = $1 AND COALESCE(${this.fence}, 0) <= $2::bigint` +
      ` AND (SELECT count(*) FROM ${this.table} WHERE ${this.id} = $1) = 1`
    );
  }

  /** Why no row matched: a newer token (stale), no such row, or several. */
  private async refusal(db: PgQueryable, id: unknown, token: bigint, where: string): Promise<Error> {
    const rows = await db.query(`SELECT COALESCE(${this.fence}, 0) AS fence FROM ${this.table} WHERE ${this.id} = $1 LIMIT 2`, [id]);
    const idColumn = this.options.idColumn ?? 'id';
    if (rows.rows.length === 0) return new DistributedLockError(`${where}: no row with ${idColumn} = ${String(id)}`);
    if (rows.rows.length > 1) {
      return new DistributedLockError(`${where}: several rows have ${idColumn} = ${String(id)}; nothing was changed — the id column must be unique`);
    }
    return new StaleFencingTokenError(`${this.options.table}:${String(id)}`, token, BigInt(String(rows.rows[0].fence)));
  }
}
