import { lockId, newToken, objectNames, SEMAPHORE_MARK, type PostgresNames } from './postgres-sql.util.js';

/**
 * The PostgreSQL backend's semaphores (created with the rest of the schema, postgres.sql.ts). A
 * holder is a row of `sem_held` keyed (key, owner) with its own expiry on the database's clock and
 * its own token (the lease tokens' sequence: larger than any granted before); a waiter is a row of
 * `sem_queue` ordered by arrival, refreshed every heartbeat like the plain queue's (a dead waiter
 * drops out). Every row carries the permits its caller asked for: callers that disagree are
 * refused, never admitted by their own count.
 *
 * Every function takes the key's advisory lock first — the same lock as the plain functions — so
 * acquirers of one key run one at a time: no over-admission under any concurrency, and a plain
 * caller and a semaphore caller never both see the key free.
 *
 * While a semaphore holds or awaits a key, the key's lease row (`held`) is the mark: owner
 * SEMAPHORE_MARK, expiring with the latest of its holders and waiters. The plain one-statement
 * insert then conflicts (no extra check on the uncontended path) and the plain function (v3)
 * answers the permits; PgTransactionLock sees a live lease.
 *
 * Waiting: a grant or release NOTIFYs '!sem <owner>' to each waiter a free permit now admits
 * (the first `permits - holders` of the queue); it asks again. No hand-off: one round trip more
 * per wake-up, but no reservation to go stale.
 */

/** The permits of the live semaphore on `p_key` (NULL when none): a holder's, else a waiter's. */
export function semaphorePermits(n: ReturnType<typeof objectNames>, now: string): string {
  return `(SELECT s.permits FROM (
          SELECT sh.permits FROM ${n.semHeld} sh WHERE sh.key = p_key AND sh.expires_at > ${now}
          UNION ALL SELECT sq.permits FROM ${n.semQueue} sq WHERE sq.key = p_key AND sq.expires_at > ${now}) s LIMIT 1)`;
}

export function semaphoreSetup(names: PostgresNames): string[] {
  const n = objectNames(names);
  const advisory = `pg_advisory_xact_lock(${lockId(names, 'p_key', 0)})`;
  const txLock = lockId(names, 'p_key', 1);
  const purge = `DELETE FROM ${n.semHeld} sh WHERE sh.key = p_key AND sh.expires_at <= v_now;
      DELETE FROM ${n.semQueue} sq WHERE sq.key = p_key AND sq.expires_at <= v_now;`;
  // The mark follows the semaphore: gone with its last holder and waiter, else expiring with the
  // latest. It never replaces a live plain lease (callers check first; the WHERE is a backstop).
  const mark = `SELECT GREATEST((SELECT max(sh.expires_at) FROM ${n.semHeld} sh WHERE sh.key = p_key),
          (SELECT max(sq.expires_at) FROM ${n.semQueue} sq WHERE sq.key = p_key)),
        (SELECT max(sh.token) FROM ${n.semHeld} sh WHERE sh.key = p_key) INTO v_until, v_last;
      IF v_until IS NULL OR v_until <= v_now THEN
        DELETE FROM ${n.held} h WHERE h.key = p_key AND h.owner = '${SEMAPHORE_MARK}';
      ELSE
        INSERT INTO ${n.held} AS h (key, owner, token, expires_at) VALUES (p_key, '${SEMAPHORE_MARK}', COALESCE(v_last, 0), v_until)
          ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at, waiting = false
          WHERE h.owner = '${SEMAPHORE_MARK}' OR h.expires_at <= v_now;
      END IF;`;
  // Wake every waiter a free permit admits now (v_permits known): each asks again.
  const wake = `v_free := v_permits - (SELECT count(*) FROM ${n.semHeld} sh WHERE sh.key = p_key);
      IF v_free > 0 THEN
        PERFORM pg_notify('${n.channel}', '!sem ' || w.owner)
          FROM (SELECT sq.owner FROM ${n.semQueue} sq WHERE sq.key = p_key ORDER BY sq.arrived LIMIT v_free) w;
      END IF;`;
  const vars = `v_now timestamptz;
      v_permits integer;
      v_free integer;
      v_until timestamptz;
      v_last bigint;`;
  return [
    `CREATE TABLE IF NOT EXISTS ${n.semHeld} (
      key text NOT NULL,
      owner text NOT NULL,
      token bigint NOT NULL,
      expires_at timestamptz NOT NULL,
      permits integer NOT NULL,
      PRIMARY KEY (key, owner)
    )`,
    `CREATE TABLE IF NOT EXISTS ${n.semQueue} (
      key text NOT NULL,
      owner text NOT NULL,
      arrived bigint NOT NULL,
      expires_at timestamptz NOT NULL,
      permits integer NOT NULL,
      PRIMARY KEY (key, owner)
    )`,
    // sem_acquire: (acquired, token, holder_ms: until the earliest holder's expiry, permits: set when
    // the key is held or awaited with other permits — a plain lease or waiter counts as 1). A caller
    // is admitted when the holders and the waiters before it leave a permit; else (p_queue) it
    // joins or refreshes its place. No grant past a transaction lock (PgTransactionLock), as v2.
    `CREATE OR REPLACE FUNCTION ${n.semAcquire}(p_key text, p_owner text, p_permits integer, p_ttl_ms bigint, p_queue boolean, p_life_ms bigint)
    RETURNS TABLE (acquired boolean, token bigint, holder_ms bigint, permits integer) LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      ${vars}
      v_held ${n.held}%ROWTYPE;
      v_token bigint;
      v_arrived bigint;
      v_taken bigint;
    BEGIN
      PERFORM ${advisory};
      v_now := clock_timestamp();
      SELECT * INTO v_held FROM ${n.held} h WHERE h.key = p_key;
      IF (FOUND AND v_held.owner <> '${SEMAPHORE_MARK}' AND v_held.expires_at > v_now)
          OR EXISTS (SELECT 1 FROM ${n.queue} qq WHERE qq.key = p_key AND qq.expires_at > v_now) THEN
        RETURN QUERY SELECT false, NULL::bigint, NULL::bigint, 1;
        RETURN;
      END IF;
      ${purge}
      v_permits := ${semaphorePermits(n, 'v_now')};
      IF v_permits IS NOT NULL AND v_permits <> p_permits THEN
        RETURN QUERY SELECT false, NULL::bigint, NULL::bigint, v_permits;
        RETURN;
      END IF;
      v_permits := p_permits;
      UPDATE ${n.semHeld} sh SET expires_at = v_now + p_ttl_ms * interval '1 millisecond'
        WHERE sh.key = p_key AND sh.owner = p_owner RETURNING sh.token INTO v_token;
      IF v_token IS NULL THEN
        SELECT sq.arrived INTO v_arrived FROM ${n.semQueue} sq WHERE sq.key = p_key AND sq.owner = p_owner;
        v_taken := (SELECT count(*) FROM ${n.semHeld} sh WHERE sh.key = p_key)
          + (SELECT count(*) FROM ${n.semQueue} sq WHERE sq.key = p_key AND (v_arrived IS NULL OR sq.arrived < v_arrived));
        IF v_taken < p_permits AND pg_try_advisory_xact_lock(${txLock}) THEN
          v_token := ${newToken(n)};
          INSERT INTO ${n.semHeld} (key, owner, token, expires_at, permits)
            VALUES (p_key, p_owner, v_token, v_now + p_ttl_ms * interval '1 millisecond', p_permits);
        END IF;
      END IF;
      IF v_token IS NOT NULL THEN
        DELETE FROM ${n.semQueue} sq WHERE sq.key = p_key AND sq.owner = p_owner;
        ${mark}
        ${wake}
        RETURN QUERY SELECT true, v_token, NULL::bigint, NULL::integer;
        RETURN;
      END IF;
      IF p_queue THEN
        INSERT INTO ${n.semQueue} AS sq (key, owner, arrived, expires_at, permits)
          VALUES (p_key, p_owner, nextval('${n.arrivals}'), v_now + p_life_ms * interval '1 millisecond', p_permits)
          ON CONFLICT (key, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at;
      END IF;
      ${mark}
      RETURN QUERY SELECT false, NULL::bigint,
        (SELECT GREATEST(0, floor(extract(epoch FROM min(sh.expires_at) - v_now) * 1000))::bigint FROM ${n.semHeld} sh WHERE sh.key = p_key),
        NULL::integer;
    END
    $fn$`,
    // sem_release: true when p_owner held a permit. Leaves the queue either way, and wakes the
    // waiters a freed permit (or a place given up) admits.
    `CREATE OR REPLACE FUNCTION ${n.semRelease}(p_key text, p_owner text)
    RETURNS boolean LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      ${vars}
      v_was boolean;
    BEGIN
      PERFORM ${advisory};
      v_now := clock_timestamp();
      DELETE FROM ${n.semQueue} sq WHERE sq.key = p_key AND sq.owner = p_owner;
      DELETE FROM ${n.semHeld} sh WHERE sh.key = p_key AND sh.owner = p_owner RETURNING sh.expires_at > v_now INTO v_was;
      ${purge}
      v_permits := ${semaphorePermits(n, 'v_now')};
      IF v_permits IS NOT NULL THEN
        ${wake}
      END IF;
      ${mark}
      RETURN COALESCE(v_was, false);
    END
    $fn$`,
    // sem_extend: true when p_owner still holds a permit (its expiry is now p_ttl_ms from now).
    `CREATE OR REPLACE FUNCTION ${n.semExtend}(p_key text, p_owner text, p_ttl_ms bigint)
    RETURNS boolean LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      ${vars}
    BEGIN
      PERFORM ${advisory};
      v_now := clock_timestamp();
      UPDATE ${n.semHeld} sh SET expires_at = v_now + p_ttl_ms * interval '1 millisecond'
        WHERE sh.key = p_key AND sh.owner = p_owner AND sh.expires_at > v_now;
      IF NOT FOUND THEN
        RETURN false;
      END IF;
      ${purge}
      ${mark}
      RETURN true;
    END
    $fn$`,
    // force_release v2: v1 for a plain lease; on a semaphore key every live holder's permit ends,
    // each told on the channel ('!lost <owner>'), the waiters the permits now admit are woken.
    // Answers one of the ended owners (NULL: nobody held the key).
    `CREATE OR REPLACE FUNCTION ${n.forceRelease}(p_key text, p_life_ms bigint)
    RETURNS text LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      ${vars}
      v_owner text;
      v_row record;
    BEGIN
      PERFORM ${advisory};
      v_now := clock_timestamp();
      SELECT h.owner INTO v_owner FROM ${n.held} h WHERE h.key = p_key AND h.expires_at > v_now;
      IF v_owner IS NULL THEN
        RETURN NULL;
      END IF;
      IF v_owner <> '${SEMAPHORE_MARK}' THEN
        PERFORM ${n.release}(p_key, v_owner, p_life_ms);
        PERFORM pg_notify('${n.channel}', '!lost ' || v_owner);
        RETURN v_owner;
      END IF;
      v_owner := NULL;
      ${purge}
      v_permits := ${semaphorePermits(n, 'v_now')};
      FOR v_row IN DELETE FROM ${n.semHeld} sh WHERE sh.key = p_key RETURNING sh.owner LOOP
        v_owner := COALESCE(v_owner, v_row.owner);
        PERFORM pg_notify('${n.channel}', '!lost ' || v_row.owner);
      END LOOP;
      IF v_permits IS NOT NULL THEN
        ${wake}
      END IF;
      ${mark}
      RETURN v_owner;
    END
    $fn$`,
  ];
}
