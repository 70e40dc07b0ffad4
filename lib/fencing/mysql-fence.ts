import { DistributedLockError } from '../errors/distributed-lock.error.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { StaleFencingTokenError } from '../errors/stale-fencing-token.error.js';
import type { LeaseSource } from './fence-token.util.js';
import { columnsToSet, quoteIdentifier, sqlFenceToken } from './sql-fence.util.js';

/**
 * A mysql2 promise `Connection`, `PoolConnection` or `Pool` — anything with `query(sql, values)`
 * resolving to `[rows or result, fields]`. Pass the connection you began your transaction on.
 */
export interface MySqlQueryable {
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>;
}

export interface MySqlFenceOptions {
  /** The guarded table (`db.table` allowed). */
  table: string;
  /** Its key column (unique). @default 'id' */
  idColumn?: string;
  /** A `BIGINT NOT NULL DEFAULT 0` column holding the highest token seen. @default 'fence' */
  fenceColumn?: string;
  /** Supplies the token when a call passes none: the service (`leases: locks`). */
  leases?: LeaseSource;
  /** The lock key that protects a row, for implicit tokens — e.g. `(id) => \`account:${id}\``. */
  lockKey?: (id: unknown) => string;
}

/** The column under which a call reads the fence back as text (dropped from the row it returns). */
const FENCE_READ = '__nest_distributed_lock_fence';

const quoteIdent = (name: unknown, field: string, qualified = false): string => quoteIdentifier(name, field, 'MySqlFence', '`', qualified);

/**
 * The SQL guard for a resource in MySQL or MariaDB — `PgFence`'s rule: the table keeps a fence
 * column, the highest token any fenced statement has shown the row. In the caller's transaction
 * (pass the connection you began it on), a call reads the row `FOR UPDATE` (it must exist once;
 * a newer fence refuses it with nothing changed), then writes the values and the token under the
 * same guard:
 *
 * ```sql
 * SELECT fence FROM accounts WHERE id = ? LIMIT 2 FOR UPDATE
 * UPDATE accounts SET balance = ?, fence = ? WHERE id = ? AND fence <= ?   -- update()
 * UPDATE accounts SET fence = ? WHERE id = ? AND fence <= ?                -- read()
 * SELECT * FROM accounts WHERE id = ?
 * ```
 *
 * An equal token is the same holder. `read()` raises the fence, so a superseded holder cannot
 * write back a value computed from what it read. The `UPDATE`'s own guard is the check that
 * counts outside a transaction too (there the row lock ends with each statement, and the row
 * returned is the row as read right after the write). MySQL cannot read the updated table in a
 * subquery of the `UPDATE` and has no `RETURNING`; and what `affectedRows` counts depends on the
 * client's `FOUND_ROWS` flag (matched rows, mysql2's default, or changed rows) — so when it says 0
 * the fence read after the write tells a refusal (a newer fence) from a write with nothing to
 * change; in both cases nothing changed.
 */
export class MySqlFence {
  private readonly table: string;
  private readonly id: string;
  private readonly fence: string;

  constructor(private readonly options: MySqlFenceOptions) {
    this.table = quoteIdent(options.table, 'table', true);
    this.id = quoteIdent(options.idColumn ?? 'id', 'idColumn');
    this.fence = quoteIdent(options.fenceColumn ?? 'fence', 'fenceColumn');
  }

  /** Set `values` on the row if `token` (default: the current lease's) is not older than its fence. */
  async update(db: MySqlQueryable, id: unknown, values: Record<string, unknown>, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `MySqlFence.update(${this.options.table}, ${String(id)})`;
    const fenced = this.tokenFor(token, where, id);
    const columns = columnsToSet(values, this.options.fenceColumn ?? 'fence', where);
    const sets = columns.map((column) => `${quoteIdent(column, 'values')} = ?`);
    return this.fenced(db, id, fenced, where, `${sets.join(', ')}, `, columns.map((c) => values[c]));
  }

  /** Read the row through the fence: raises it to `token`; a stale token throws. */
  async read(db: MySqlQueryable, id: unknown, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `MySqlFence.read(${this.options.table}, ${String(id)})`;
    return this.fenced(db, id, this.tokenFor(token, where, id), where, '', []);
  }

  private async fenced(db: MySqlQueryable, id: unknown, token: bigint, where: string, sets: string, values: unknown[]): Promise<Record<string, unknown>> {
    this.checkId(id, where);
    // The token goes into the text as an integer literal (checked: digits only, within BIGINT), so
    // the server compares integers exactly; a string parameter would be compared as a double,
    // which cannot tell 2^53 + 1 from 2^53. Fences are read back as text for the same reason.
    const literal = token.toString();
    const fenceText = `CAST(COALESCE(${this.fence}, 0) AS CHAR)`;
    // The row, once, and its fence (locked until the caller's transaction ends).
    const [locked] = (await db.query(`SELECT ${fenceText} AS fence FROM ${this.table} WHERE ${this.id} = ? LIMIT 2 FOR UPDATE`, [id])) as [Array<Record<string, unknown>>, unknown];
    const before = BigInt(String(this.onlyRow(locked, id, where).fence));
    if (before > token) throw new StaleFencingTokenError(`${this.options.table}:${String(id)}`, token, before);
    const [header] = (await db.query(`UPDATE ${this.table} SET ${sets}${this.fence} = ${literal} WHERE ${this.id} = ? AND COALESCE(${this.fence}, 0) <= ${literal}`, [
      ...values,
      id,
    ])) as [{ affectedRows?: number }, unknown];
    const [rows] = (await db.query(`SELECT *, ${fenceText} AS \`${FENCE_READ}\` FROM ${this.table} WHERE ${this.id} = ? LIMIT 2`, [id])) as [Array<Record<string, unknown>>, unknown];
    const { [FENCE_READ]: after, ...current } = this.onlyRow(rows, id, where);
    if ((header?.affectedRows ?? 0) > 0) return current; // matched (FOUND_ROWS, mysql2's default) or changed: applied
    // 0 rows: refused by the guard — or, on a client without FOUND_ROWS, matched with nothing to
    // change (the fence already this token). Either way nothing changed; the fence tells which.
    const fence = BigInt(String(after));
    if (fence > token) throw new StaleFencingTokenError(`${this.options.table}:${String(id)}`, token, fence);
    return current;
  }

  private tokenFor(token: bigint | number | undefined, where: string, id: unknown): bigint {
    return sqlFenceToken(token, this.options, where, id, 'a signed BIGINT');
  }

  private checkId(id: unknown, where: string): void {
    if (id === undefined || id === null) throw new InvalidLockOptionsError('id', 'must be given', where);
  }

  private onlyRow(rows: Array<Record<string, unknown>>, id: unknown, where: string): Record<string, unknown> {
    const idColumn = this.options.idColumn ?? 'id';
    if (rows.length === 0) throw new DistributedLockError(`${where}: no row with ${idColumn} = ${String(id)}`);
    if (rows.length > 1) throw new DistributedLockError(`${where}: several rows have ${idColumn} = ${String(id)}; nothing was changed — the id column must be unique`);
    return rows[0];
  }
}
