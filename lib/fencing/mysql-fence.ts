import { refuseOtherDialect } from '../common/sql-dialect.js';
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
 * (pass the connection you began it on), a call locks the row (it must exist once; a newer fence
 * refuses the call with nothing changed), writes the values and the token under the same guard,
 * and reads the row back with a locking read:
 *
 * ```sql
 * SELECT fence FROM accounts WHERE id = ? LIMIT 2 FOR UPDATE
 * UPDATE accounts SET balance = ?, fence = 7 WHERE id = ? AND fence <= 7   -- update(); read() sets only the fence
 * SELECT * FROM accounts WHERE id = ? LIMIT 2 FOR UPDATE
 * ```
 *
 * An equal token is the same holder. `read()` raises the fence, so a superseded holder cannot
 * write back a value computed from what it read. The `UPDATE`'s own guard is the check that counts
 * outside a transaction too, where each statement commits alone: what it matched (the server's
 * "Rows matched", sent whatever the client's `FOUND_ROWS` flag) decides the outcome — 0 is a
 * refusal (stale, or the row went meanwhile; nothing written), 1 applied, more a non-unique id
 * (said so: they were written). The read-back is a locking read because in REPEATABLE READ a plain
 * one returns the transaction's snapshot, older than a write the same holder made elsewhere.
 * MySQL cannot read the updated table in a subquery of the `UPDATE` and has no `RETURNING`, hence
 * three statements. Ids and values must be plain values: mysql2 expands arrays and objects.
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
    const columns = columnsToSet(values, this.fenceName, where);
    for (const column of columns) {
      // MySQL's column names are case-insensitive: `FENCE` is the fence, `ID` the key.
      if (column.toLowerCase() === this.fenceName.toLowerCase()) {
        throw new InvalidLockOptionsError('values', `must not set the fence column "${this.fenceName}": the guard sets it to the token`, where);
      }
      if (column.toLowerCase() === this.idName.toLowerCase()) {
        throw new InvalidLockOptionsError('values', `must not set the id column "${this.idName}": the call reads the row back by its id`, where);
      }
      checkValue(values[column], `values.${column}`, where);
    }
    const sets = columns.map((column) => `${quoteIdent(column, 'values')} = ?`);
    return this.fenced(db, id, fenced, where, `${sets.join(', ')}, `, columns.map((c) => values[c]));
  }

  /** Read the row through the fence: raises it to `token`; a stale token throws. */
  async read(db: MySqlQueryable, id: unknown, token?: bigint | number): Promise<Record<string, unknown>> {
    const where = `MySqlFence.read(${this.options.table}, ${String(id)})`;
    return this.fenced(db, id, this.tokenFor(token, where, id), where, '', []);
  }

  private get fenceName(): string {
    return this.options.fenceColumn ?? 'fence';
  }

  private get idName(): string {
    return this.options.idColumn ?? 'id';
  }

  private async fenced(db: MySqlQueryable, id: unknown, token: bigint, where: string, sets: string, values: unknown[]): Promise<Record<string, unknown>> {
    refuseOtherDialect(db, 'mysql', 'db', where);
    checkId(id, where);
    // The token goes into the text as an integer literal (checked: digits only, within BIGINT), so
    // the server compares integers exactly; a string parameter would be compared as a double,
    // which cannot tell 2^53 + 1 from 2^53. Fences are read back as text for the same reason.
    const literal = token.toString();
    const fenceText = `CAST(COALESCE(${this.fence}, 0) AS CHAR)`;
    const stale = (fence: bigint): StaleFencingTokenError => new StaleFencingTokenError(`${this.options.table}:${String(id)}`, token, fence);
    // The row, once, and its fence (locked until the caller's transaction ends).
    const [locked] = (await db.query(`SELECT ${fenceText} AS fence FROM ${this.table} WHERE ${this.id} = ? LIMIT 2 FOR UPDATE`, [id])) as [unknown, unknown];
    const before = this.fenceOf(this.onlyRow(locked, id, where, 'nothing was changed').fence, where);
    if (before > token) throw stale(before);
    const [header] = (await db.query(`UPDATE ${this.table} SET ${sets}${this.fence} = ${literal} WHERE ${this.id} = ? AND COALESCE(${this.fence}, 0) <= ${literal}`, [
      ...values,
      id,
    ])) as [UpdateHeader, unknown];
    const matched = matchedRows(header);
    // A locking read: the latest committed version (a plain read in REPEATABLE READ would return
    // the transaction's snapshot, older than a write the same holder made from elsewhere).
    const [rows] = (await db.query(`SELECT *, ${fenceText} AS \`${FENCE_READ}\` FROM ${this.table} WHERE ${this.id} = ? LIMIT 2 FOR UPDATE`, [id])) as [unknown, unknown];
    if (matched > 1) throw new DistributedLockError(`${where}: ${matched} rows have ${this.idName} = ${String(id)} and were written — the id column must be unique`);
    if (matched === 0) {
      // Refused by the guard: a newer fence came between the lock and the write (outside a
      // transaction), or the row went. Nothing was written.
      const now = Array.isArray(rows) ? (rows as Array<Record<string, unknown>>) : [];
      if (now.length === 1) {
        const fence = this.fenceOf(now[0][FENCE_READ], where);
        if (fence > token) throw stale(fence);
      }
      throw new DistributedLockError(`${where}: the row was replaced or removed while the call ran; nothing was written — read it again (in a transaction, so it cannot change under you) before writing`);
    }
    const { [FENCE_READ]: after, ...current } = this.onlyRow(rows, id, where, 'one was written');
    const fence = this.fenceOf(after, where);
    // The row holds this token, or a newer one set since (outside a transaction). Less: the column
    // cannot hold it (an INT clamped by a non-strict sql_mode) — no fence at all.
    if (fence < token) throw new DistributedLockError(`${where}: the fence column kept ${fence} for token ${token}: it must be a BIGINT`);
    current[Object.keys(current).find((k) => k.toLowerCase() === this.fenceName.toLowerCase()) ?? this.fenceName] = fence.toString();
    return current;
  }

  /** A fence read back as text; anything else (a client's typeCast turned it into a number) cannot be compared exactly. */
  private fenceOf(value: unknown, where: string): bigint {
    if (typeof value === 'string' && /^\d+$/.test(value)) return BigInt(value);
    if (Buffer.isBuffer(value) && /^\d+$/.test(value.toString('latin1'))) return BigInt(value.toString('latin1'));
    throw new DistributedLockError(`${where}: the fence came back as ${typeof value}, not as text (a typeCast of the client's?): it cannot be compared exactly; nothing more was done`);
  }

  private tokenFor(token: bigint | number | undefined, where: string, id: unknown): bigint {
    return sqlFenceToken(token, this.options, where, id, 'a signed BIGINT');
  }

  private onlyRow(rows: unknown, id: unknown, where: string, changed: string): Record<string, unknown> {
    if (!Array.isArray(rows)) throw new DistributedLockError(`${where}: the client answered a SELECT with no rows (not a mysql2 promise client?)`);
    if (rows.length === 0) throw new DistributedLockError(`${where}: no row with ${this.idName} = ${String(id)}`);
    if (rows.length > 1) throw new DistributedLockError(`${where}: several rows have ${this.idName} = ${String(id)}; ${changed} — the id column must be unique`);
    if (Array.isArray(rows[0]) || typeof rows[0] !== 'object' || rows[0] === null) {
      throw new InvalidLockOptionsError('db', 'must return rows as objects (not rowsAsArray)', where);
    }
    return rows[0] as Record<string, unknown>;
  }
}

interface UpdateHeader {
  affectedRows?: number;
  info?: string;
}

/**
 * The rows an UPDATE matched: the server's own count ("Rows matched: N  Changed: M"), sent
 * whatever the client's flags; else `affectedRows`, which is the matched count under FOUND_ROWS
 * (mysql2's default).
 */
function matchedRows(header: UpdateHeader | undefined): number {
  const info = /Rows matched: (\d+)/.exec(header?.info ?? '');
  return info ? Number(info[1]) : (header?.affectedRows ?? 0);
}

/** An id mysql2 sends as one plain value: a string, a finite number, a bigint or a Buffer. */
function checkId(id: unknown, where: string): void {
  const plain = typeof id === 'string' || typeof id === 'bigint' || (typeof id === 'number' && Number.isFinite(id)) || Buffer.isBuffer(id);
  if (!plain) throw new InvalidLockOptionsError('id', `must be a string, a finite number, a bigint or a Buffer, got ${id === null ? 'null' : Array.isArray(id) ? 'an array' : typeof id}`, where);
}

/** A value mysql2 sends as one value: not an array (a list) or a plain object (`col = val` pairs, or raw SQL by toSqlString). */
function checkValue(value: unknown, field: string, where: string): void {
  const plain =
    value === null || ['string', 'bigint', 'boolean'].includes(typeof value) || (typeof value === 'number' && Number.isFinite(value)) || Buffer.isBuffer(value) || value instanceof Date;
  if (!plain) throw new InvalidLockOptionsError(field, 'must be a plain value (string, finite number, bigint, boolean, null, Date or Buffer); for a JSON column pass JSON.stringify(value)', where);
}
