import type { MySqlNames } from './mysql-sql.util.js';
import { TRANSACTION_MARK } from './mysql-xact.sql.js';

/** A key's row by its hash (the primary key). */
const KEY = 'key_hash = UNHEX(SHA2(?, 256))';
const NOW = 'UTC_TIMESTAMP(6)';

/**
 * The statements the backend sends. The uncontended paths are one plain statement each, no
 * procedure: `fastAcquire` inserts the row of a key that has none (a row of any kind, held,
 * expired or waited for, fails it with ER_DUP_ENTRY: the caller takes the procedure), its token
 * the insert's AUTO_INCREMENT; `fastRelease` deletes the caller's live row when no waiter marked
 * it (0 rows: the procedure decides). A key with live waiters always has a row (the procedures
 * keep it while anyone waits), so the insert never passes a queue.
 */
export function mysqlStatements(n: MySqlNames) {
  return {
    // key, key, owner, ttl µs, listener
    fastAcquire: `INSERT INTO ${n.held} (key_hash, lock_key, owner, expires_at, waiting, listener) VALUES (UNHEX(SHA2(?, 256)), ?, ?, ${NOW} + INTERVAL ? MICROSECOND, 0, ?)`,
    // key, owner
    fastRelease: `DELETE FROM ${n.held} WHERE ${KEY} AND owner = ? AND waiting = 0 AND expires_at > ${NOW}`,
    // key, owner, ttl ms, queue, entry life ms, listener
    acquire: `CALL ${n.acquire}(?, ?, ?, ?, ?, ?)`,
    // key, owner, listener
    release: `CALL ${n.release}(?, ?, ?)`,
    // key, listener
    forceRelease: `CALL ${n.forceRelease}(?, ?)`,
    // ttl µs, listener, key, owner. A row lock orders it with the procedures: an acquire that found
    // the lease expired replaced the row (another owner), which this then does not match. The
    // holder's current doorbell is recorded (a forced release tells it there).
    extend: `UPDATE ${n.held} SET expires_at = ${NOW} + INTERVAL ? MICROSECOND, listener = ? WHERE ${KEY} AND owner = ? AND expires_at > ${NOW}`,
    // key: the live holder, its token (text: exact), what is left of it, live waiters. A key a
    // transaction holds (MySqlTransactionLock) has no lease: not shown, as on PostgreSQL.
    inspect: `SELECT h.owner, CAST(h.token AS CHAR) AS token, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, ${NOW}, h.expires_at) DIV 1000) AS remaining_ms,
        (SELECT COUNT(*) FROM ${n.queue} q WHERE q.key_hash = h.key_hash AND q.expires_at > ${NOW}) AS waiters
      FROM ${n.held} h WHERE h.${KEY} AND h.expires_at > ${NOW} AND h.owner NOT IN ('', '${TRANSACTION_MARK}')`,
    // prefix pattern (mysql-sql.util prefixPattern), max
    listKeys: `SELECT lock_key FROM ${n.held} WHERE lock_key LIKE ? ESCAPE '!' AND expires_at > ${NOW} AND owner NOT IN ('', '${TRANSACTION_MARK}') LIMIT ?`,
    ping: 'SELECT 1',
    // Semaphores (mysql-semaphore.sql.ts): key, owner, permits, ttl ms, queue, entry life ms, listener
    semAcquire: `CALL ${n.semAcquire}(?, ?, ?, ?, ?, ?, ?)`,
    // key, owner
    semRelease: `CALL ${n.semRelease}(?, ?)`,
    // key, owner, ttl ms
    semExtend: `CALL ${n.semExtend}(?, ?, ?)`,
    // key: the holder whose permit ends last (its token, what is left of it), the counts.
    semInspect: `SELECT CAST(s.token AS CHAR) AS token, s.permits, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, ${NOW}, s.expires_at) DIV 1000) AS remaining_ms,
        (SELECT COUNT(*) FROM ${n.semHeld} c WHERE c.key_hash = s.key_hash AND c.expires_at > ${NOW}) AS holders,
        (SELECT COUNT(*) FROM ${n.semQueue} q WHERE q.key_hash = s.key_hash AND q.expires_at > ${NOW}) AS waiters
      FROM ${n.semHeld} s WHERE s.${KEY} AND s.expires_at > ${NOW} ORDER BY s.expires_at DESC LIMIT 1`,
  };
}

export type MySqlStatements = ReturnType<typeof mysqlStatements>;

/**
 * What nobody came back for, older than `ageS` seconds, in batches of 1,000: mail of dead
 * listeners, expired queue entries and semaphore rows, and key rows expired with nobody waiting
 * (a semaphore's mark only once no live holder or waiter is left; a transaction's placeholder never
 * expires: the last statement looks at those).
 */
export function sweepStatements(n: MySqlNames, ageS: number): string[] {
  const old = `${NOW} - INTERVAL ${ageS} SECOND`;
  return [
    `DELETE FROM ${n.mail} WHERE created < ${old} LIMIT 1000`,
    `DELETE FROM ${n.queue} WHERE expires_at < ${old} LIMIT 1000`,
    `DELETE FROM ${n.semQueue} WHERE expires_at < ${old} LIMIT 1000`,
    `DELETE FROM ${n.semHeld} WHERE expires_at < ${old} LIMIT 1000`,
    `DELETE FROM ${n.held} WHERE expires_at < ${old}
       AND NOT EXISTS (SELECT 1 FROM ${n.queue} x WHERE x.key_hash = ${n.held}.key_hash AND x.expires_at > ${NOW})
       AND NOT EXISTS (SELECT 1 FROM ${n.semHeld} x WHERE x.key_hash = ${n.held}.key_hash AND x.expires_at > ${NOW})
       AND NOT EXISTS (SELECT 1 FROM ${n.semQueue} x WHERE x.key_hash = ${n.held}.key_hash AND x.expires_at > ${NOW})
     LIMIT 1000`,
    // Transaction locks' grants and placeholders whose transaction ended (mysql-xact.sql.ts).
    `CALL ${n.xactSweep}(500)`,
    // Lock rows of keys no transaction tried for a day (mysql-xact.sql.ts).
    `CALL ${n.xactRetire}(500)`,
  ];
}
