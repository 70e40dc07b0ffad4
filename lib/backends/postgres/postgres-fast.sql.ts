import { lockId, newToken, objectNames, type PostgresNames } from './postgres-sql.util.js';

/**
 * One statement each — no function, no transaction of its own beyond the statement — for the
 * uncontended case, which is most calls: `acquire` ($1 key, $2 owner, $3 ttl ms) inserts the row of
 * a free key nobody waits for and returns its token; `release` ($1 key, $2 owner) deletes the
 * caller's row when no waiter has marked it, returning whether it was still live. No row back:
 * the caller takes the function path. Both only TRY the key's lock, so a function at work on the
 * key turns them away instead of being raced, and `release` never deletes a row a waiter marked
 * after this statement's snapshot: the delete re-checks the row's latest version.
 */
export function fastStatements(names: PostgresNames): { acquire: string; release: string } {
  const n = objectNames(names);
  const keyLock = `pg_try_advisory_xact_lock(${lockId(names, '$1::text', 0)})`;
  return {
    acquire: `INSERT INTO ${n.held} AS h (key, owner, token, expires_at)
      SELECT $1::text, $2::text, ${newToken(n)}, clock_timestamp() + $3::bigint * interval '1 millisecond'
      WHERE ${keyLock} AND pg_try_advisory_xact_lock(${lockId(names, '$1::text', 1)})
        AND NOT EXISTS (SELECT 1 FROM ${n.queue} qq WHERE qq.key = $1::text)
      ON CONFLICT (key) DO NOTHING
      RETURNING h.token`,
    release: `DELETE FROM ${n.held} h
      WHERE h.key = $1::text AND h.owner = $2::text AND NOT h.waiting AND ${keyLock}
      RETURNING h.expires_at > clock_timestamp() AS held`,
  };
}
