import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { fenceToken, type LeaseSource } from './fence-token.util.js';

/** What the SQL fences (PgFence, MySqlFence) share: identifiers, the columns a write sets, the token. */

/** The largest token a signed 64-bit column (PostgreSQL's bigint, MySQL's BIGINT) holds. */
const MAX_TOKEN = 2n ** 63n - 1n;

/**
 * Quote an identifier with `quote` (`"` for PostgreSQL, a backtick for MySQL), doubling it inside.
 * A table may be qualified (`billing.accounts`); a column is one name, whatever it holds.
 */
export function quoteIdentifier(name: unknown, field: string, fence: string, quote: string, qualified = false): string {
  if (typeof name !== 'string' || name.length === 0 || name.includes('\0')) throw new InvalidLockOptionsError(field, 'must be a non-empty identifier', fence);
  return (qualified ? name.split('.') : [name])
    .map((part) => {
      if (part.length === 0) throw new InvalidLockOptionsError(field, `must be a non-empty identifier, got "${name}"`, fence);
      return `${quote}${part.split(quote).join(quote + quote)}${quote}`;
    })
    .join('.');
}

/** The columns an update sets: at least one, never the fence column (the guard sets it to the token). */
export function columnsToSet(values: Record<string, unknown> | undefined, fenceColumn: string, where: string): string[] {
  const columns = Object.keys(values ?? {});
  if (columns.length === 0) throw new InvalidLockOptionsError('values', 'must set at least one column', where);
  if (columns.includes(fenceColumn)) {
    throw new InvalidLockOptionsError('values', `must not set the fence column "${fenceColumn}": the guard sets it to the token`, where);
  }
  return columns;
}

/** The call's token (given, or the lease's on the row's lock key), within a signed 64-bit column. */
export function sqlFenceToken(
  token: bigint | number | undefined,
  options: { leases?: LeaseSource; lockKey?: (id: unknown) => string },
  where: string,
  id: unknown,
  column: string,
): bigint {
  const fenced = fenceToken(token, options.leases, where, options.lockKey?.(id));
  if (fenced > MAX_TOKEN) throw new InvalidLockOptionsError('token', `must fit ${column} (at most 2^63 − 1), got ${fenced}`, where);
  return fenced;
}
