import { lockId, newToken, objectNames, type PostgresNames } from './postgres-sql.util.js';

/**
 * The function PgTransactionLock calls inside the caller's transaction (created with the rest of
 * the schema by the backend, postgres.sql.ts): the key's transaction lock (advisory, seed 1),
 * then the lease table's verdict, then a durable token.
 */
export function xactAcquireFunction(names: PostgresNames): string {
  const n = objectNames(names);
  const txLock = lockId(names, 'p_key', 1);
  const token = newToken(n);
  // xact_acquire: run inside the caller's transaction (PgTransactionLock). status 'acquired'
  // (token), 'busy-transaction' (another transaction held the key all of p_wait_ms),
  // 'busy-lease' (holder_ms), 'busy-queue' (lease waiters come first), 'isolation'. A busy
  // answer never aborts the caller's transaction: the exception block is a subtransaction whose
  // rollback gives back the transaction lock taken in it (and the lock_timeout set in it).
  return (
    `CREATE OR REPLACE FUNCTION ${n.xactAcquire}(p_key text, p_wait_ms bigint)
    RETURNS TABLE (status text, token bigint, holder_ms bigint) LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      v_timeout text := current_setting('lock_timeout');
      v_now timestamptz;
      v_holder_ms bigint;
    BEGIN
      -- Under REPEATABLE READ the snapshot predates the wait: a lease granted meanwhile is unseen.
      IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN QUERY SELECT 'isolation'::text, NULL::bigint, NULL::bigint;
        RETURN;
      END IF;
      BEGIN
        IF p_wait_ms <= 0 THEN
          IF NOT pg_try_advisory_xact_lock(${txLock}) THEN
            RAISE SQLSTATE '55P03';
          END IF;
        ELSE
          PERFORM set_config('lock_timeout', p_wait_ms || 'ms', true);
          PERFORM pg_advisory_xact_lock(${txLock});
          PERFORM set_config('lock_timeout', v_timeout, true);
        END IF;
        -- A lease acquire that granted held this lock until its commit: its row is visible now.
        v_now := clock_timestamp();
        SELECT GREATEST(0, floor(extract(epoch FROM h.expires_at - v_now) * 1000))::bigint INTO v_holder_ms
          FROM ${n.held} h WHERE h.key = p_key AND h.expires_at > v_now;
        IF FOUND THEN
          RAISE SQLSTATE 'NDL01';
        END IF;
        IF EXISTS (SELECT 1 FROM ${n.queue} qq WHERE qq.key = p_key AND qq.expires_at > v_now) THEN
          RAISE SQLSTATE 'NDL02';
        END IF;
      EXCEPTION
        WHEN lock_not_available THEN
          RETURN QUERY SELECT 'busy-transaction'::text, NULL::bigint, NULL::bigint;
          RETURN;
        WHEN SQLSTATE 'NDL01' THEN
          RETURN QUERY SELECT 'busy-lease'::text, NULL::bigint, v_holder_ms;
          RETURN;
        WHEN SQLSTATE 'NDL02' THEN
          RETURN QUERY SELECT 'busy-queue'::text, NULL::bigint, NULL::bigint;
          RETURN;
      END;
      -- The token is durable once the caller's transaction commits. The sequence logs its advance
      -- once per 32 values, perhaps in a transaction that rolled back (never flushed: a crash would
      -- issue the same values again); a transaction that wrote no WAL of its own commits without
      -- a flush. A transactional logical message (any wal_level, any role; logical decoding
      -- consumers see prefix 'nest-distributed-lock') makes this one's COMMIT flush, the
      -- sequence's advance with it.
      PERFORM pg_logical_emit_message(true, 'nest-distributed-lock', 'token');
      RETURN QUERY SELECT 'acquired'::text, ${token}, NULL::bigint;
    END
    $fn$`
  );
}
