/**
 * Semaphores (`permits` ≥ 2) on the MySQL backend: each holder a row of `<prefix>_sem_held` with its
 * own expiry and token, waiters in `<prefix>_sem_queue` in arrival order. The key's row of
 * `<prefix>_held` is the semaphore's **mark** (owner `!sem`): every call on the key, plain or not,
 * locks it first (mysql.sql.ts lockKeyRow), so plain locks and semaphores of one key are serialised
 * by one row lock, and a plain call that meets the mark learns there is a semaphore. Every grant
 * writes the mark anew, so a holder's token is the lease table's next AUTO_INCREMENT: larger than
 * every token granted on the key before, plain or not.
 *
 * A waiter is admitted when the live holders plus the live waiters ahead of it are fewer than the
 * permits: it asks again when told ('!sem <owner>' in its process's mail, rung like a hand-off),
 * at its heartbeat, or when the soonest holder's permit ends.
 */
import { SEMAPHORE_MARK, type MySqlNames } from './mysql-sql.util.js';
import { yieldToTransaction } from './mysql-xact-yield.sql.js';

export { SEMAPHORE_MARK };

const ms = (column: string): string => `INTERVAL ${column} * 1000 MICROSECOND`;

/** The semaphore tables (idempotent). */
export function semaphoreTables(n: MySqlNames): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${n.semHeld} (
      key_hash BINARY(32) NOT NULL,
      owner VARBINARY(255) NOT NULL,
      token BIGINT UNSIGNED NOT NULL,
      expires_at DATETIME(6) NOT NULL,
      permits INT NOT NULL,
      listener BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (key_hash, owner)
    ) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${n.semQueue} (
      seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      key_hash BINARY(32) NOT NULL,
      owner VARBINARY(255) NOT NULL,
      expires_at DATETIME(6) NOT NULL,
      permits INT NOT NULL,
      listener BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (seq),
      UNIQUE KEY key_owner (key_hash, owner),
      KEY key_seq (key_hash, seq)
    ) ENGINE=InnoDB`,
  ];
}

/** The permits the live holders or waiters of the key agreed on (NULL: none live). */
export const livePermits = (n: MySqlNames): string => `COALESCE(
    (SELECT permits FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at > v_now LIMIT 1),
    (SELECT permits FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at > v_now LIMIT 1))`;

/**
 * Tell the first waiters that a permit may be free: one mail line '!sem <owner>' per waiter that
 * could be admitted now (permits − live holders), for waiters whose listener is registered; the
 * listeners to ring (the caller's own too) gathered in v_rings.
 */
export const wakeSemaphoreWaiters = (n: MySqlNames): string => `
  SET v_free = GREATEST(0, v_permits - (SELECT COUNT(*) FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at > v_now));
  IF v_free > 0 THEN
    INSERT INTO ${n.mail} (server_id, listener, body, created)
      SELECT @@server_id, w.listener, CONCAT('!sem ', w.owner), v_now FROM (
        SELECT q.owner, q.listener FROM ${n.semQueue} q
        WHERE q.key_hash = v_hash AND q.expires_at > v_now AND q.listener <> 0
          AND EXISTS (SELECT 1 FROM ${n.listeners} l WHERE l.server_id = @@server_id AND l.conn_id = q.listener)
        ORDER BY q.seq LIMIT v_free) w;
    SET v_rings = CONCAT_WS(',', v_rings, (SELECT GROUP_CONCAT(DISTINCT w.listener) FROM (
        SELECT q.listener FROM ${n.semQueue} q
        WHERE q.key_hash = v_hash AND q.expires_at > v_now AND q.listener <> 0
        ORDER BY q.seq LIMIT v_free) w));
  END IF;`;

/** The semaphore procedures, by name. `key` helpers come from mysql.sql.ts (shared declarations). */
export function semaphoreProcedures(n: MySqlNames, parts: { header: (name: string, params: string) => string; variables: string; begin: string; lockKeyRow: string }): Record<string, string> {
  const { header, variables, begin, lockKeyRow } = parts;
  const semVariables = `${variables}
  DECLARE v_permits INT DEFAULT NULL;
  DECLARE v_free INT DEFAULT 0;
  DECLARE v_rings VARCHAR(4000) DEFAULT NULL;
  DECLARE v_mine BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_ahead INT DEFAULT 0;`;
  const dropExpired = `
  DELETE FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at <= v_now;
  DELETE FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at <= v_now;`;
  return {
    // (acquired, token, holder_ms, permits): permits set when the key is held or awaited with
    // another number (a plain lock: 1) — refused, nothing written.
    [n.semAcquire]: `${header(n.semAcquire, 'IN p_key VARBINARY(3072), IN p_owner VARBINARY(255), IN p_permits INT, IN p_ttl_ms BIGINT, IN p_queue TINYINT, IN p_life_ms BIGINT, IN p_listener BIGINT UNSIGNED')}
proc: BEGIN${semVariables}${begin}${lockKeyRow}${yieldToTransaction(
    n,
    `-- A transaction holds the key (MySqlTransactionLock): queue, and ask again at the heartbeat.
      IF p_queue THEN
        INSERT INTO ${n.semQueue} (key_hash, owner, expires_at, permits, listener) VALUES (v_hash, p_owner, v_now + ${ms('p_life_ms')}, p_permits, p_listener)
          ON DUPLICATE KEY UPDATE expires_at = v_now + ${ms('p_life_ms')}, listener = p_listener;
      END IF;
      COMMIT;
      SELECT 0 AS acquired, NULL AS token, NULL AS holder_ms, NULL AS permits;
      LEAVE proc;`,
  )}
  IF v_owner <> '${SEMAPHORE_MARK}' AND (
      (v_owner <> '' AND v_expires > v_now)
      OR EXISTS (SELECT 1 FROM ${n.queue} WHERE key_hash = v_hash AND expires_at > v_now)) THEN
    -- (A free row stays: live lease waiters keep the key's row, so the uncontended insert cannot pass them.)
    COMMIT;
    SELECT 0 AS acquired, NULL AS token, NULL AS holder_ms, 1 AS permits;
    LEAVE proc;
  END IF;
  ${dropExpired}
  SET v_permits = ${livePermits(n)};
  IF v_permits IS NOT NULL AND v_permits <> p_permits THEN
    COMMIT;
    SELECT 0 AS acquired, NULL AS token, NULL AS holder_ms, v_permits AS permits;
    LEAVE proc;
  END IF;
  SELECT CAST(token AS CHAR) INTO v_body FROM ${n.semHeld} WHERE key_hash = v_hash AND owner = p_owner;
  IF v_body IS NOT NULL THEN
    UPDATE ${n.semHeld} SET expires_at = v_now + ${ms('p_ttl_ms')}, listener = p_listener WHERE key_hash = v_hash AND owner = p_owner;
    UPDATE ${n.held} SET expires_at = GREATEST(expires_at, v_now + ${ms('p_ttl_ms')}) WHERE key_hash = v_hash;
    COMMIT;
    SELECT 1 AS acquired, v_body AS token, NULL AS holder_ms, NULL AS permits;
    LEAVE proc;
  END IF;
  SELECT seq INTO v_mine FROM ${n.semQueue} WHERE key_hash = v_hash AND owner = p_owner;
  SET v_ahead = (SELECT COUNT(*) FROM ${n.semQueue} WHERE key_hash = v_hash AND (v_mine IS NULL OR seq < v_mine));
  IF (SELECT COUNT(*) FROM ${n.semHeld} WHERE key_hash = v_hash) + v_ahead < p_permits THEN
    DELETE FROM ${n.semQueue} WHERE key_hash = v_hash AND owner = p_owner;
    SET v_expires = GREATEST(IF(v_owner = '${SEMAPHORE_MARK}', v_expires, v_now), v_now + ${ms('p_ttl_ms')});
    DELETE FROM ${n.held} WHERE key_hash = v_hash;
    INSERT INTO ${n.held} (key_hash, lock_key, owner, expires_at, waiting, listener) VALUES (v_hash, p_key, '${SEMAPHORE_MARK}', v_expires, 1, 0);
    SET v_token = LAST_INSERT_ID();
    INSERT INTO ${n.semHeld} (key_hash, owner, token, expires_at, permits, listener) VALUES (v_hash, p_owner, v_token, v_now + ${ms('p_ttl_ms')}, p_permits, p_listener);
    COMMIT;
    SELECT 1 AS acquired, CAST(v_token AS CHAR) AS token, NULL AS holder_ms, NULL AS permits;
    LEAVE proc;
  END IF;
  IF p_queue THEN
    INSERT INTO ${n.semQueue} (key_hash, owner, expires_at, permits, listener) VALUES (v_hash, p_owner, v_now + ${ms('p_life_ms')}, p_permits, p_listener)
      ON DUPLICATE KEY UPDATE expires_at = v_now + ${ms('p_life_ms')}, listener = p_listener;
  END IF;
  IF v_owner <> '${SEMAPHORE_MARK}' THEN
    -- A placeholder or an expired plain row: the key's row becomes the mark while anyone waits.
    UPDATE ${n.held} SET owner = '${SEMAPHORE_MARK}', waiting = 1, listener = 0 WHERE key_hash = v_hash;
  END IF;
  IF NOT p_queue AND NOT EXISTS (SELECT 1 FROM ${n.semHeld} WHERE key_hash = v_hash) AND NOT EXISTS (SELECT 1 FROM ${n.semQueue} WHERE key_hash = v_hash) THEN
    DELETE FROM ${n.held} WHERE key_hash = v_hash;
  END IF;
  COMMIT;
  SELECT 0 AS acquired, NULL AS token,
    (SELECT GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now, MIN(expires_at)) DIV 1000) FROM ${n.semHeld} WHERE key_hash = v_hash) AS holder_ms, NULL AS permits;
END`,
    // (held, rings): held = p_owner held a live permit. Leaves the queue either way; the first
    // waiters a free permit could admit are told.
    [n.semRelease]: `${header(n.semRelease, 'IN p_key VARBINARY(3072), IN p_owner VARBINARY(255)')}
proc: BEGIN${semVariables}${begin}
  SELECT owner INTO v_owner FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
  SET v_now = UTC_TIMESTAMP(6);
  SET v_was = EXISTS (SELECT 1 FROM ${n.semHeld} WHERE key_hash = v_hash AND owner = p_owner AND expires_at > v_now);
  DELETE FROM ${n.semHeld} WHERE key_hash = v_hash AND owner = p_owner;
  DELETE FROM ${n.semQueue} WHERE key_hash = v_hash AND owner = p_owner;
  IF v_owner = '${SEMAPHORE_MARK}' THEN
    ${dropExpired}
    SET v_permits = ${livePermits(n)};
    IF v_permits IS NULL THEN
      DELETE FROM ${n.held} WHERE key_hash = v_hash;
    ELSE
      ${wakeSemaphoreWaiters(n)}
    END IF;
  END IF;
  COMMIT;
  SELECT v_was AS held, v_rings AS rings;
END`,
    // (held): p_owner's live permit now lasts p_ttl_ms from now; the mark lasts at least as long.
    [n.semExtend]: `${header(n.semExtend, 'IN p_key VARBINARY(3072), IN p_owner VARBINARY(255), IN p_ttl_ms BIGINT')}
proc: BEGIN${semVariables}${begin}
  SELECT owner INTO v_owner FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
  SET v_now = UTC_TIMESTAMP(6);
  UPDATE ${n.semHeld} SET expires_at = v_now + ${ms('p_ttl_ms')} WHERE key_hash = v_hash AND owner = p_owner AND expires_at > v_now;
  SET v_was = ROW_COUNT() > 0;
  IF v_was THEN
    UPDATE ${n.held} SET expires_at = GREATEST(expires_at, v_now + ${ms('p_ttl_ms')}) WHERE key_hash = v_hash;
  END IF;
  COMMIT;
  SELECT v_was AS held;
END`,
  };
}

/**
 * A forced release of a semaphore key (in the force procedure, after the key's row is locked and
 * found to be a mark): every live holder ends and is told ('!lost <owner>' to its listener), the
 * waiters a free permit could admit are told; v_victim is one of the holders.
 */
export const forceSemaphore = (n: MySqlNames): string => `
    DELETE FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at <= v_now;
    DELETE FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at <= v_now;
    SELECT owner INTO v_victim FROM ${n.semHeld} WHERE key_hash = v_hash ORDER BY expires_at DESC LIMIT 1;
    INSERT INTO ${n.mail} (server_id, listener, body, created)
      SELECT @@server_id, s.listener, CONCAT('!lost ', s.owner), v_now FROM ${n.semHeld} s
      WHERE s.key_hash = v_hash AND s.listener <> 0
        AND EXISTS (SELECT 1 FROM ${n.listeners} l WHERE l.server_id = @@server_id AND l.conn_id = s.listener);
    SET v_rings = (SELECT GROUP_CONCAT(DISTINCT s.listener) FROM ${n.semHeld} s WHERE s.key_hash = v_hash AND s.listener <> 0);
    SET v_permits = (SELECT permits FROM ${n.semQueue} WHERE key_hash = v_hash LIMIT 1);
    DELETE FROM ${n.semHeld} WHERE key_hash = v_hash;
    IF v_permits IS NULL THEN
      DELETE FROM ${n.held} WHERE key_hash = v_hash;
    ELSE
      ${wakeSemaphoreWaiters(n)}
    END IF;`;
