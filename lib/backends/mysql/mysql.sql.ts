/**
 * The MySQL / MariaDB backend's schema and procedures: SQL both servers speak (MariaDB 10.2+,
 * MySQL 8.0). A held key is a row of `<prefix>_held` — owner, token, expiry on the server's clock
 * (UTC), a `waiting` mark — never a session-bound GET_LOCK: any pooled connection serves any call,
 * and a holder whose connection is recycled keeps its lease. A busy key's path is one CALL of a
 * procedure (one round trip, one short transaction that runs on the server whatever the client
 * does meanwhile); the uncontended path is one plain statement (mysql-statements.ts).
 *
 * Tokens: the AUTO_INCREMENT of `<prefix>_held.token`. Every grant inserts the key's row anew, so
 * it draws the next value; the counter is persisted (MariaDB 10.2.4+, MySQL 8.0) and never goes
 * back across a restart or a crash, and row-based replication carries the values to a replica
 * with the rows. Allocation is not transactional, so concurrent grants never wait for each other's
 * commits (a counter row would serialise every grant of the database behind one row lock).
 *
 * Serialisation per key: every procedure first makes sure the key's row exists (an insert of a
 * free placeholder, or nothing if it is there) and locks it (`FOR UPDATE`), under READ COMMITTED
 * (no gap locks); every change to the key's queue happens under that lock. A placeholder never
 * outlives its transaction: a free key is granted at once, to the caller or to the head waiter.
 *
 * Waking waiters (the doorbell, mysql-doorbell.ts): a hand-off to a waiter of another process
 * leaves a line in `<prefix>_mail` for that process's listener connection, in the grant's own
 * transaction, and the releasing process ends the listener's sleep with `KILL QUERY` once the
 * procedure has returned. A listener counts only while its row is in `<prefix>_listeners`, a MEMORY
 * table (emptied when the server restarts) keyed by `@@server_id`: a connection id from before a
 * restart, or from another server, is never killed.
 */
import { forceSemaphore, livePermits, semaphoreProcedures, semaphoreTables, SEMAPHORE_MARK } from './mysql-semaphore.sql.js';
import type { MySqlNames } from './mysql-sql.util.js';
import { TRANSACTION_MARK, xactProcedures, xactTables, yieldToTransaction } from './mysql-xact.sql.js';

const ms = (column: string): string => `INTERVAL ${column} * 1000 MICROSECOND`;

/** Variables every key procedure shares. */
const VARIABLES = `
  DECLARE v_hash BINARY(32) DEFAULT UNHEX(SHA2(p_key, 256));
  DECLARE v_now DATETIME(6);
  DECLARE v_owner VARBINARY(255) DEFAULT NULL;
  DECLARE v_expires DATETIME(6);
  DECLARE v_token BIGINT UNSIGNED;
  DECLARE v_listener BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_head VARBINARY(255) DEFAULT NULL;
  DECLARE v_head_ms BIGINT;
  DECLARE v_head_listener BIGINT UNSIGNED;
  DECLARE v_wake BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_body VARBINARY(600) DEFAULT NULL;
  DECLARE v_was TINYINT DEFAULT 0;
  DECLARE v_xfree TINYINT DEFAULT NULL;`;

/** After the declarations: any error rolls back (and is passed on); one READ COMMITTED transaction (no gap locks). */
const BEGIN = `
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;`;

/**
 * Grant the key to the head waiter `v_head` for the ttl it queued with and tell its process: the
 * mail line "<owner> <ms> <token>" (none when the waiter is the caller's own process, which reads
 * the answer's wake/body). It starts at once, no claim round trip.
 */
const handOff = (n: MySqlNames): string => `
        DELETE FROM ${n.queue} WHERE key_hash = v_hash AND owner = v_head;
        DELETE FROM ${n.held} WHERE key_hash = v_hash;
        INSERT INTO ${n.held} (key_hash, lock_key, owner, expires_at, waiting, listener)
          VALUES (v_hash, p_key, v_head, v_now + ${ms('v_head_ms')}, EXISTS (SELECT 1 FROM ${n.queue} WHERE key_hash = v_hash), v_head_listener);
        SET v_token = LAST_INSERT_ID(), v_owner = v_head, v_expires = v_now + ${ms('v_head_ms')};
        IF v_head_listener <> 0 AND EXISTS (SELECT 1 FROM ${n.listeners} WHERE server_id = @@server_id AND conn_id = v_head_listener) THEN
          SET v_wake = v_head_listener, v_body = CONCAT(v_head, ' ', v_head_ms, ' ', v_token);
          IF v_head_listener <> p_listener THEN
            INSERT INTO ${n.mail} (server_id, listener, body, created) VALUES (@@server_id, v_head_listener, v_body, v_now);
          END IF;
        END IF;`;

/** Dead waiters out (their entries expired), then the head waiter (if any) into v_head. */
const headWaiter = (n: MySqlNames): string => `
      DELETE FROM ${n.queue} WHERE key_hash = v_hash AND expires_at <= v_now;
      SELECT owner, ttl_ms, listener INTO v_head, v_head_ms, v_head_listener FROM ${n.queue} WHERE key_hash = v_hash ORDER BY seq LIMIT 1;`;

/** A key given up (released or expired): to the next live waiter, or its row goes. */
const freeKey = (n: MySqlNames): string => `
      ${headWaiter(n)}
      IF v_head IS NULL THEN
        DELETE FROM ${n.held} WHERE key_hash = v_hash;
      ELSE
        ${handOff(n)}
      END IF;`;

/** The caller into the key's queue (or its place refreshed), the key's row marked as waited for. */
const joinQueue = (n: MySqlNames): string => `
    INSERT INTO ${n.queue} (key_hash, owner, expires_at, ttl_ms, listener) VALUES (v_hash, p_owner, v_now + ${ms('p_life_ms')}, p_ttl_ms, p_listener)
      ON DUPLICATE KEY UPDATE expires_at = v_now + ${ms('p_life_ms')}, ttl_ms = p_ttl_ms, listener = p_listener;
    UPDATE ${n.held} SET waiting = 1 WHERE key_hash = v_hash AND waiting = 0;`;

/** The key's row, locked: made first (a free placeholder) if absent. */
const lockKeyRow = (n: MySqlNames): string => `
  INSERT INTO ${n.held} (key_hash, lock_key, owner, expires_at) VALUES (v_hash, p_key, '', '1970-01-01 00:00:01')
    ON DUPLICATE KEY UPDATE key_hash = key_hash;
  SELECT owner, expires_at, token, listener INTO v_owner, v_expires, v_token, v_listener FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
  SET v_now = UTC_TIMESTAMP(6);`;

/** The tables (idempotent). */
export function tableStatements(n: MySqlNames): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${n.held} (
      key_hash BINARY(32) NOT NULL,
      lock_key VARBINARY(3072) NOT NULL,
      owner VARBINARY(255) NOT NULL,
      token BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      expires_at DATETIME(6) NOT NULL,
      waiting TINYINT NOT NULL DEFAULT 0,
      listener BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (key_hash),
      UNIQUE KEY token (token),
      KEY lock_key (lock_key(255))
    ) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${n.queue} (
      seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      key_hash BINARY(32) NOT NULL,
      owner VARBINARY(255) NOT NULL,
      expires_at DATETIME(6) NOT NULL,
      ttl_ms BIGINT NOT NULL,
      listener BIGINT UNSIGNED NOT NULL DEFAULT 0,
      PRIMARY KEY (seq),
      UNIQUE KEY key_owner (key_hash, owner),
      KEY key_seq (key_hash, seq)
    ) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${n.mail} (
      seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
      server_id INT UNSIGNED NOT NULL,
      listener BIGINT UNSIGNED NOT NULL,
      body VARBINARY(600) NOT NULL,
      created DATETIME(6) NOT NULL,
      PRIMARY KEY (seq),
      KEY listener (server_id, listener, seq)
    ) ENGINE=InnoDB`,
    `CREATE TABLE IF NOT EXISTS ${n.listeners} (
      server_id INT UNSIGNED NOT NULL,
      conn_id BIGINT UNSIGNED NOT NULL,
      PRIMARY KEY (server_id, conn_id)
    ) ENGINE=MEMORY`,
    ...semaphoreTables(n),
    ...xactTables(n),
  ];
}

/** The procedures, by name (created when absent: a changed body gets a new version suffix). */
export function procedureStatements(n: MySqlNames): Record<string, string> {
  const header = (name: string, params: string): string => `CREATE PROCEDURE ${name}(${params}) SQL SECURITY INVOKER MODIFIES SQL DATA`;
  return {
    ...semaphoreProcedures(n, { header, variables: VARIABLES, begin: BEGIN, lockKeyRow: lockKeyRow(n) }),
    ...xactProcedures(n, { header, variables: VARIABLES, begin: BEGIN, lockKeyRow: lockKeyRow(n) }),
    // (acquired, token, holder_ms, wake, body). Ours already (a hand-off's claim, a refresh):
    // the ttl from now. Free: to the head waiter if it is not us (then we queue), else ours.
    // Busy: queue (p_queue) and answer the holder's token (every token issued on the key before
    // this answer is at most it) and what is left of its lease.
    [n.acquire]: `${header(n.acquire, 'IN p_key VARBINARY(3072), IN p_owner VARBINARY(255), IN p_ttl_ms BIGINT, IN p_queue TINYINT, IN p_life_ms BIGINT, IN p_listener BIGINT UNSIGNED')}
proc: BEGIN${VARIABLES}
  DECLARE v_permits INT DEFAULT NULL;${BEGIN}${lockKeyRow(n)}${yieldToTransaction(
    n,
    `-- A transaction holds the key (MySqlTransactionLock): queue, and ask again at the heartbeat.
      IF p_queue THEN
        ${joinQueue(n)}
      END IF;
      COMMIT;
      SELECT 0 AS acquired, CAST(v_token AS CHAR) AS token, NULL AS holder_ms, 0 AS wake, NULL AS body, NULL AS permits;
      LEAVE proc;`,
  )}
  IF v_owner = '${SEMAPHORE_MARK}' THEN
    DELETE FROM ${n.semHeld} WHERE key_hash = v_hash AND expires_at <= v_now;
    DELETE FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at <= v_now;
    SET v_permits = ${livePermits(n)};
    IF v_permits IS NOT NULL THEN
      -- A semaphore holds or awaits the key: the caller is refused, nothing is written.
      COMMIT;
      SELECT 0 AS acquired, NULL AS token, NULL AS holder_ms, 0 AS wake, NULL AS body, v_permits AS permits;
      LEAVE proc;
    END IF;
    SET v_expires = v_now; -- a mark nothing lives under: the key is free
  END IF;
  IF v_expires > v_now AND v_owner = p_owner THEN
    UPDATE ${n.held} SET expires_at = v_now + ${ms('p_ttl_ms')}, listener = p_listener WHERE key_hash = v_hash;
    DELETE FROM ${n.queue} WHERE key_hash = v_hash AND owner = p_owner;
    COMMIT;
    SELECT 1 AS acquired, CAST(v_token AS CHAR) AS token, NULL AS holder_ms, 0 AS wake, NULL AS body, NULL AS permits;
    LEAVE proc;
  END IF;
  IF v_expires <= v_now THEN
    ${headWaiter(n)}
    IF v_head IS NULL OR v_head = p_owner THEN
      DELETE FROM ${n.queue} WHERE key_hash = v_hash AND owner = p_owner;
      DELETE FROM ${n.held} WHERE key_hash = v_hash;
      INSERT INTO ${n.held} (key_hash, lock_key, owner, expires_at, waiting, listener)
        VALUES (v_hash, p_key, p_owner, v_now + ${ms('p_ttl_ms')}, EXISTS (SELECT 1 FROM ${n.queue} WHERE key_hash = v_hash), p_listener);
      SET v_token = LAST_INSERT_ID();
      COMMIT;
      SELECT 1 AS acquired, CAST(v_token AS CHAR) AS token, NULL AS holder_ms, 0 AS wake, NULL AS body, NULL AS permits;
      LEAVE proc;
    END IF;
    ${handOff(n)}
  END IF;
  IF p_queue THEN
    ${joinQueue(n)}
  END IF;
  COMMIT;
  SELECT 0 AS acquired, CAST(v_token AS CHAR) AS token, GREATEST(0, TIMESTAMPDIFF(MICROSECOND, v_now, v_expires) DIV 1000) AS holder_ms, v_wake AS wake, v_body AS body, NULL AS permits;
END`,
    // (held, wake, body): held = p_owner held the key live. Leaves the queue either way; a key it
    // frees (or finds expired) goes to the next live waiter.
    [n.release]: `${header(n.release, 'IN p_key VARBINARY(3072), IN p_owner VARBINARY(255), IN p_listener BIGINT UNSIGNED')}
proc: BEGIN${VARIABLES}${BEGIN}
  SELECT owner, expires_at INTO v_owner, v_expires FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
  SET v_now = UTC_TIMESTAMP(6);
  DELETE FROM ${n.queue} WHERE key_hash = v_hash AND owner = p_owner;
  IF v_owner IS NULL OR v_owner = '${SEMAPHORE_MARK}' OR (v_owner <> p_owner AND v_expires > v_now) THEN
    COMMIT;
    SELECT 0 AS held, 0 AS wake, NULL AS body;
    LEAVE proc;
  END IF;
  SET v_was = (v_owner = p_owner AND v_expires > v_now);
  ${freeKey(n)}
  COMMIT;
  SELECT v_was AS held, v_wake AS wake, v_body AS body;
END`,
    // (owner, wake, body, lost, lost_body): the live holder (NULL when free), released as it would
    // release, and told: '!lost <owner>' (owner ids never start with '!') to its listener.
    [n.forceRelease]: `${header(n.forceRelease, 'IN p_key VARBINARY(3072), IN p_listener BIGINT UNSIGNED')}
proc: BEGIN${VARIABLES}
  DECLARE v_victim VARBINARY(255);
  DECLARE v_lost BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_permits INT DEFAULT NULL;
  DECLARE v_free INT DEFAULT 0;
  DECLARE v_rings VARCHAR(4000) DEFAULT NULL;${BEGIN}
  SELECT owner, expires_at, listener INTO v_owner, v_expires, v_listener FROM ${n.held} WHERE key_hash = v_hash FOR UPDATE;
  SET v_now = UTC_TIMESTAMP(6);
  IF v_owner IS NULL OR v_expires <= v_now THEN
    COMMIT;
    SELECT NULL AS owner, 0 AS wake, NULL AS body, 0 AS lost, NULL AS lost_body, NULL AS rings;
    LEAVE proc;
  END IF;
  IF v_owner = '${TRANSACTION_MARK}' THEN
    -- A transaction's (MySqlTransactionLock): it ends at the transaction's end, not here.
    COMMIT;
    SELECT NULL AS owner, 0 AS wake, NULL AS body, 0 AS lost, NULL AS lost_body, NULL AS rings;
    LEAVE proc;
  END IF;
  IF v_owner = '${SEMAPHORE_MARK}' THEN
    ${forceSemaphore(n)}
    COMMIT;
    SELECT v_victim AS owner, 0 AS wake, NULL AS body, 0 AS lost, NULL AS lost_body, v_rings AS rings;
    LEAVE proc;
  END IF;
  SET v_victim = v_owner;
  ${freeKey(n)}
  IF v_listener <> 0 AND EXISTS (SELECT 1 FROM ${n.listeners} WHERE server_id = @@server_id AND conn_id = v_listener) THEN
    SET v_lost = v_listener;
    IF v_listener <> p_listener THEN
      INSERT INTO ${n.mail} (server_id, listener, body, created) VALUES (@@server_id, v_listener, CONCAT('!lost ', v_victim), v_now);
    END IF;
  END IF;
  COMMIT;
  SELECT v_victim AS owner, v_wake AS wake, v_body AS body, v_lost AS lost, CONCAT('!lost ', v_victim) AS lost_body, NULL AS rings;
END`,
  };
}
