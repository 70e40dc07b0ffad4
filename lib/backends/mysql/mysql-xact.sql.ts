/**
 * Transaction locks on MySQL / MariaDB (MySqlTransactionLock): a key held by the caller's own
 * transaction, released by its COMMIT or ROLLBACK. InnoDB's only transaction-scoped locks are row
 * locks, so a key has a committed **lock row** in `<prefix>_xact` (made through the pool before any
 * transaction reads it, and retired only a day after the key was last tried: a locking read of a
 * missing row under REPEATABLE READ locks the gap instead, and would stall every insert into it),
 * which the transaction locks with `FOR UPDATE SKIP LOCKED` (never waits, never raises: a busy
 * answer leaves the transaction as it was).
 *
 * While the transaction holds the lock row, the key's row of `<prefix>_held` is a committed
 * **placeholder** (owner `!xact`, no expiry), written through the pool by `xact_claim`: the
 * uncontended lease insert fails on it (ER_DUP_ENTRY), and every procedure that could grant the
 * key — a lease, a semaphore, a forced release — first tries the lock row with `SKIP LOCKED`: a row
 * it cannot lock is a transaction holding the key (busy); a row it locks makes the placeholder
 * stale (its transaction ended), and the lock stays with the procedure until its commit, so no
 * transaction takes the key in between. `xact_claim` runs only while the caller holds the lock row,
 * so the placeholder it finds is always stale, and a lease it finds has committed: it answers busy.
 *
 * The grant's token is the lease table's next AUTO_INCREMENT (the placeholder's), so MySqlFence
 * orders transactions and leases. The grant is recorded in `<prefix>_xact_grants`; the caller's
 * transaction reads that row back with a plain read — under REPEATABLE READ a snapshot taken before
 * the grant does not show it, and such a transaction would read data older than the previous
 * holder wrote: it is refused. Procedures use READ COMMITTED (no gap locks).
 */
import { livePermits } from './mysql-semaphore.sql.js';
import { SEMAPHORE_MARK, TRANSACTION_MARK, type MySqlNames } from './mysql-sql.util.js';

export { TRANSACTION_MARK };
export { yieldToTransaction } from './mysql-xact-yield.sql.js';

/** The placeholder's expiry: none (only its lock row tells whether it is live). */
const NEVER = "'9999-12-31 00:00:00'";

/** The tables (idempotent). */
export function xactTables(n: MySqlNames): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${n.xact} (
      key_hash BINARY(32) NOT NULL,
      mark BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (key_hash)
    ) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${n.xactUsed} (
      key_hash BINARY(32) NOT NULL,
      used_at DATETIME(6) NOT NULL,
      PRIMARY KEY (key_hash),
      KEY used_at (used_at)
    ) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${n.xactGrants} (
      key_hash BINARY(32) NOT NULL,
      token BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (key_hash, token)
    ) ENGINE=InnoDB`,
  ];
}

/** Live lease waiters or semaphore waiters of the key. */
const waitersExist = (n: MySqlNames): string =>
  `(EXISTS (SELECT 1 FROM ${n.queue} WHERE key_hash = v_hash AND expires_at > v_now) OR EXISTS (SELECT 1 FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at > v_now))`;

/** What is left of the key's lease (or of the semaphore's last permit), ms. */
const remaining = (n: MySqlNames): string => `IF(v_owner = '${SEMAPHORE_MARK}',
      (SELECT GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now, MIN(expires_at)) DIV 1000) FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at > v_now),
      GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) DIV 1000))`;

/** The procedures, by name. `parts` come from mysql.sql.ts (shared declarations and helpers). */
export function xactProcedures(n: MySqlNames, parts: { header: (name: string, params: string) => string; variables: string; begin: string; lockKeyRow: string }): Record<string, string> {
  const { header, variables, begin, lockKeyRow } = parts;
  return {
    // Through the pool, before the caller's transaction tries the key (autocommit: each statement
    // alone, plain reads that lock nothing). Makes the key's lock row if it has none (a
    // transaction's lock on it makes no difference: the row is only read), and answers what the
    // key looks like: 'busy-lease' (holder_ms), 'busy-queue' (waiters come first), else 'free'
    // (a transaction may hold it: the lock row decides); whether the key's row is a transaction's
    // placeholder (the caller's own, perhaps); `mark` as committed; the server.
    [n.xactPrepare]: `${header(n.xactPrepare, 'IN p_key VARBINARY(3072)')}
proc: BEGIN
  DECLARE v_hash BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_owner VARBINARY(255) DEFAULT NULL;
  DECLARE v_expires DATETIME(6);
  DECLARE v_mark BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_used DATETIME(6) DEFAULT NULL;
  DECLARE v_permits INT DEFAULT 0;
  DECLARE v_waiters INT DEFAULT 0;
  DECLARE v_status VARCHAR(16) DEFAULT 'free';
  DECLARE v_holder_ms BIGINT DEFAULT NULL;
  -- Only SELECT … INTO here: MariaDB reads a table in an IF condition with a lock, which would
  -- wait for the transaction holding the key's lock row.
  IF @@autocommit = 0 THEN
    -- Nothing written: an insert here would stay uncommitted (and keep the key's row locked).
    SELECT 'free' AS status, NULL AS holder_ms, 0 AS xact, NULL AS mark, VERSION() AS version, DATABASE() AS db, 0 AS autocommit;
    LEAVE proc;
  END IF;
  -- When the key was last tried (written at most hourly), before its lock row is made sure of: a
  -- retirement (xact_retire, a day unused) either sees this or happened before the row is made anew.
  SELECT used_at INTO v_used FROM ${n.xactUsed} WHERE key_hash = v_hash;
  IF v_used IS NULL OR v_used < v_now - INTERVAL 1 HOUR THEN
    INSERT INTO ${n.xactUsed} (key_hash, used_at) VALUES (v_hash, v_now) ON DUPLICATE KEY UPDATE used_at = v_now;
  END IF;
  SELECT mark INTO v_mark FROM ${n.xact} WHERE key_hash = v_hash;
  IF v_mark IS NULL THEN
    INSERT IGNORE INTO ${n.xact} (key_hash) VALUES (v_hash);
    SELECT mark INTO v_mark FROM ${n.xact} WHERE key_hash = v_hash;
  END IF;
  SELECT owner, expires_at INTO v_owner, v_expires FROM ${n.held} WHERE key_hash = v_hash;
  SELECT COUNT(*) INTO v_permits FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at > v_now;
  SELECT COUNT(*) INTO v_waiters FROM ${n.queue} WHERE key_hash = v_hash AND expires_at > v_now;
  SELECT v_waiters + COUNT(*) INTO v_waiters FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at > v_now;
  IF (v_owner = '${SEMAPHORE_MARK}' AND v_permits > 0)
      OR (v_owner NOT IN ('', '${TRANSACTION_MARK}', '${SEMAPHORE_MARK}') AND v_expires > v_now) THEN
    SET v_status = 'busy-lease';
    IF v_owner = '${SEMAPHORE_MARK}' THEN
      SELECT GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now, MIN(expires_at)) DIV 1000) INTO v_holder_ms FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at > v_now;
    ELSE
      SET v_holder_ms = GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) DIV 1000);
    END IF;
  ELSEIF v_waiters > 0 THEN
    SET v_status = 'busy-queue';
  END IF;
  SELECT v_status AS status, v_holder_ms AS holder_ms, (v_owner <=> '${TRANSACTION_MARK}') AS xact, CAST(v_mark AS CHAR) AS mark, VERSION() AS version,
    DATABASE() AS db, @@autocommit AS autocommit;
END`,
    // Through the pool, while the caller's transaction holds the key's lock row: the key to the
    // transaction — a placeholder with the next token, recorded for the caller's snapshot check —
    // unless a lease or a semaphore holds it ('busy-lease') or anyone waits for it ('busy-queue':
    // the key's row is left free for the waiters, who take it at their next call).
    [n.xactClaim]: `${header(n.xactClaim, 'IN p_key VARBINARY(3072), IN p_conn BIGINT UNSIGNED')}
proc: BEGIN${variables}${begin}${lockKeyRow}
  IF v_owner = '${SEMAPHORE_MARK}' THEN
    DELETE FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at <= v_now;
    DELETE FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at <= v_now;
  END IF;
  IF (v_owner = '${SEMAPHORE_MARK}' AND ${livePermits(n)} IS NOT NULL)
      OR (v_owner NOT IN ('', '${TRANSACTION_MARK}', '${SEMAPHORE_MARK}') AND v_expires > v_now) THEN
    COMMIT;
    SELECT 'busy-lease' AS status, NULL AS token, ${remaining(n)} AS holder_ms;
    LEAVE proc;
  END IF;
  DELETE FROM ${n.queue} WHERE key_hash = v_hash AND expires_at <= v_now;
  IF ${waitersExist(n)} THEN
    -- A placeholder of the caller's own connection may be this very transaction's (an earlier
    -- acquire whose mark a ROLLBACK TO SAVEPOINT undid): it stays. Any other is stale.
    IF NOT (v_owner = '${TRANSACTION_MARK}' AND v_listener = p_conn) THEN
      UPDATE ${n.held} SET owner = '', expires_at = '1970-01-01 00:00:01', waiting = 1, listener = 0 WHERE key_hash = v_hash;
    END IF;
    COMMIT;
    SELECT 'busy-queue' AS status, NULL AS token, NULL AS holder_ms;
    LEAVE proc;
  END IF;
  DELETE FROM ${n.held} WHERE key_hash = v_hash;
  INSERT INTO ${n.held} (key_hash, lock_key, owner, expires_at, waiting, listener) VALUES (v_hash, p_key, '${TRANSACTION_MARK}', ${NEVER}, 0, p_conn);
  SET v_token = LAST_INSERT_ID();
  -- Earlier grants of the key belong to ended transactions (the caller holds the lock row).
  DELETE FROM ${n.xactGrants} WHERE key_hash = v_hash;
  INSERT INTO ${n.xactGrants} (key_hash, token) VALUES (v_hash, v_token);
  COMMIT;
  SELECT 'acquired' AS status, CAST(v_token AS CHAR) AS token, NULL AS holder_ms;
END`,
    // Through the pool (the backend's sweep): up to p_max keys with grants, each whose lock row is
    // free (its transaction ended), in a transaction of its own: the grants go, and a stale
    // placeholder goes too (or becomes a free row while anyone waits: they take it at their next
    // call). A lock row this tries while a transaction wants it makes that transaction busy for
    // the moment (it tries again within its wait).
    [n.xactSweep]: `${header(n.xactSweep, 'IN p_max INT')}
BEGIN
  DECLARE v_hash BINARY(32) DEFAULT NULL;
  DECLARE v_start BINARY(32) DEFAULT UNHEX(SHA2(RAND(), 256));
  DECLARE v_last BINARY(32) DEFAULT NULL;
  DECLARE v_wrapped TINYINT DEFAULT 0;
  DECLARE v_now DATETIME(6);
  DECLARE v_owner VARBINARY(255);
  DECLARE v_xfree TINYINT;
  DECLARE v_done INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  sweep: WHILE v_done < p_max DO
    SET v_hash = NULL;
    SELECT key_hash INTO v_hash FROM ${n.xactGrants} WHERE key_hash > COALESCE(v_last, v_start) ORDER BY key_hash LIMIT 1;
    IF v_hash IS NULL AND NOT v_wrapped THEN
      -- From a random point, once round: keys held by open transactions cannot starve the rest.
      SET v_wrapped = 1, v_last = REPEAT(X'00', 32);
      SELECT key_hash INTO v_hash FROM ${n.xactGrants} WHERE key_hash >= v_last ORDER BY key_hash LIMIT 1;
    END IF;
    IF v_hash IS NULL OR (v_wrapped AND v_hash > v_start) THEN LEAVE sweep; END IF;
    SET v_last = v_hash, v_done = v_done + 1;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SET v_xfree = NULL;
    SELECT 1 INTO v_xfree FROM ${n.xact} WHERE key_hash = v_hash FOR UPDATE SKIP LOCKED;
    IF v_xfree IS NOT NULL THEN
      SET v_owner = NULL, v_now = UTC_TIMESTAMP(6);
      SELECT owner INTO v_owner FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
      IF v_owner = '${TRANSACTION_MARK}' THEN
        IF ${waitersExist(n)} THEN
          UPDATE ${n.held} SET owner = '', expires_at = '1970-01-01 00:00:01', waiting = 1 WHERE key_hash = v_hash;
        ELSE
          DELETE FROM ${n.held} WHERE key_hash = v_hash;
        END IF;
      END IF;
      DELETE FROM ${n.xactGrants} WHERE key_hash = v_hash;
    END IF;
    COMMIT;
  END WHILE;
  SELECT v_done AS visited;
END`,
    // Through the pool (the backend's sweep): up to p_max lock rows nobody tried for a day go, with
    // their grants — only a free lock row (locked here first) of a key whose row is no placeholder.
    // A transaction's prepare refreshes its key's `used_at` (hourly) before it locks the row, so a
    // row goes only under a caller paused for ~a day between the two: its locking read then finds
    // no row (REPEATABLE READ: it locks the gap until that transaction ends) and it answers busy,
    // or unavailable; nothing is granted.
    [n.xactRetire]: `${header(n.xactRetire, 'IN p_max INT')}
BEGIN
  DECLARE v_hash BINARY(32) DEFAULT NULL;
  DECLARE v_owner VARBINARY(255);
  DECLARE v_xfree TINYINT;
  DECLARE v_used DATETIME(6);
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_cutoff DATETIME(6) DEFAULT UTC_TIMESTAMP(6) - INTERVAL 1 DAY;
  DECLARE v_after DATETIME(6) DEFAULT '1970-01-01 00:00:01';
  DECLARE v_after_hash BINARY(32) DEFAULT REPEAT(X'00', 32);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  retire: WHILE v_done < p_max DO
    SET v_hash = NULL;
    SELECT key_hash, used_at INTO v_hash, v_used FROM ${n.xactUsed}
      WHERE used_at < v_cutoff AND (used_at > v_after OR (used_at = v_after AND key_hash > v_after_hash)) ORDER BY used_at, key_hash LIMIT 1;
    IF v_hash IS NULL THEN LEAVE retire; END IF;
    SET v_done = v_done + 1, v_after = v_used, v_after_hash = v_hash;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SET v_xfree = NULL, v_owner = NULL, v_used = NULL;
    SELECT 1 INTO v_xfree FROM ${n.xact} WHERE key_hash = v_hash FOR UPDATE SKIP LOCKED;
    SELECT owner INTO v_owner FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
    SELECT used_at INTO v_used FROM ${n.xactUsed} WHERE key_hash = v_hash FOR UPDATE;
    IF v_xfree IS NOT NULL AND NOT (v_owner <=> '${TRANSACTION_MARK}') AND v_used < v_cutoff THEN
      DELETE FROM ${n.xact} WHERE key_hash = v_hash;
      DELETE FROM ${n.xactGrants} WHERE key_hash = v_hash;
      DELETE FROM ${n.xactUsed} WHERE key_hash = v_hash;
    ELSEIF v_xfree IS NULL THEN
      -- Locked by a transaction, or gone: a plain read tells (an IF condition's read would wait for the lock).
      SELECT COUNT(*) INTO v_xfree FROM ${n.xact} WHERE key_hash = v_hash;
      IF v_xfree = 0 THEN
        DELETE FROM ${n.xactUsed} WHERE key_hash = v_hash;
      END IF;
    END IF;
    COMMIT;
  END WHILE;
  SELECT v_done AS visited;
END`,
  };
}
