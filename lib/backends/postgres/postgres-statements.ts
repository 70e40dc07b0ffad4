import { createHash } from 'node:crypto';
import type { PgPoolLike, PgQueryConfigLike } from './postgres-client.interface.js';
import { checkout } from './pg-checkout.js';
import { fastStatements } from './postgres-fast.sql.js';
import { objectNames, SEMAPHORE_MARK, type PostgresNames } from './postgres-sql.util.js';

/** The statements the backend runs, each named (prepared once per connection). */
export type BackendStatements = Record<
  'fastAcquire' | 'acquire' | 'fastRelease' | 'release' | 'extend' | 'inspect' | 'listKeys' | 'forceRelease' | 'semAcquire' | 'semRelease' | 'semExtend' | 'semInspect',
  PgQueryConfigLike
>;

/** A named statement for `text`: its name is derived from the text, so backends sharing a pool never clash. */
function prepared(text: string): PgQueryConfigLike {
  return { name: `ndl_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`, text };
}

/**
 * The uncontended one-statement paths (postgres-fast.sql.ts) and the function calls
 * (postgres.sql.ts) for one schema and prefix.
 */
export function backendStatements(names: PostgresNames): BackendStatements {
  const n = objectNames(names);
  const fast = fastStatements(names);
  return {
    fastAcquire: prepared(fast.acquire),
    acquire: prepared(`SELECT acquired, token, holder_ms, permits FROM ${n.acquire}($1, $2, $3, $4, $5)`),
    fastRelease: prepared(fast.release),
    release: prepared(`SELECT ${n.release}($1, $2, $3) AS held`),
    extend: prepared(`SELECT ${n.extend}($1, $2, $3) AS held`),
    // The live holder's row: its token, what is left of it on the database's clock, live waiters
    // (owner: SEMAPHORE_MARK for a semaphore, then described by semInspect).
    inspect: prepared(
      `SELECT h.owner, h.token, GREATEST(0, floor(extract(epoch FROM h.expires_at - clock_timestamp()) * 1000))::bigint AS remaining_ms,
        (SELECT count(*) FROM ${n.queue} qq WHERE qq.key = h.key AND qq.expires_at > clock_timestamp()) AS waiters
       FROM ${n.held} h WHERE h.key = $1 AND h.expires_at > clock_timestamp()`,
    ),
    // The keys starting with $1 that inspect would find held: a live lease row, or a semaphore's
    // mark with a live holder (a mark also lives on for waiters alone). `left() =`, not LIKE: a
    // prefix's `%`, `_` and `\` are the user's characters, not wildcards.
    listKeys: prepared(
      `SELECT h.key FROM ${n.held} h
       WHERE left(h.key, length($1::text)) = $1::text AND h.expires_at > clock_timestamp()
         AND (h.owner <> '${SEMAPHORE_MARK}' OR EXISTS (SELECT 1 FROM ${n.semHeld} sh WHERE sh.key = h.key AND sh.expires_at > clock_timestamp()))
       LIMIT $2::bigint`,
    ),
    forceRelease: prepared(`SELECT ${n.forceRelease}($1, $2) AS owner`),
    // Semaphores (postgres-semaphore.sql.ts): $1 key, $2 owner, $3 permits, $4 ttl ms, $5 queue, $6 waiter entry life ms.
    semAcquire: prepared(`SELECT acquired, token, holder_ms, permits FROM ${n.semAcquire}($1, $2, $3, $4, $5, $6)`),
    semRelease: prepared(`SELECT ${n.semRelease}($1, $2) AS held`),
    semExtend: prepared(`SELECT ${n.semExtend}($1, $2, $3) AS held`),
    // A semaphore key: the holder whose hold ends last (its token, what is left of it), the counts.
    semInspect: prepared(
      `SELECT sh.token, sh.permits, GREATEST(0, floor(extract(epoch FROM sh.expires_at - clock_timestamp()) * 1000))::bigint AS remaining_ms,
        (SELECT count(*) FROM ${n.semHeld} c WHERE c.key = sh.key AND c.expires_at > clock_timestamp()) AS holders,
        (SELECT count(*) FROM ${n.semQueue} sq WHERE sq.key = sh.key AND sq.expires_at > clock_timestamp()) AS waiters
       FROM ${n.semHeld} sh WHERE sh.key = $1 AND sh.expires_at > clock_timestamp() ORDER BY sh.expires_at DESC LIMIT 1`,
    ),
  };
}

/** A constant advisory lock id under which concurrent start-ups create the schema one at a time. */
const SETUP_LOCK = 0x6e646c31; // "ndl1"

/** Run the schema statements (postgres.sql.ts) in one transaction, one start-up at a time. */
export async function createSchema(pool: PgPoolLike, statements: readonly string[]): Promise<void> {
  const { client, unguard } = await checkout(pool);
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [SETUP_LOCK]);
    for (const statement of statements) await client.query(statement);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    // A client that errored (heard by the guard) is not queryable: the pool closes it at release.
    unguard();
    client.release();
  }
}
