import { SEMAPHORE_MARK, TRANSACTION_MARK, type MySqlNames } from './mysql-sql.util.js';

/**
 * For a key procedure, right after its row is locked (lockKeyRow): when the row is a transaction's
 * placeholder, try the key's lock row. Locked by a transaction: `busy` runs (it must answer and
 * LEAVE). Locked here: the placeholder is stale — the key counts as a free placeholder (owner '',
 * expired), and the lock row stays locked until this procedure commits.
 */
export const yieldToTransaction = (n: MySqlNames, busy: string): string => `
  IF v_owner = '${TRANSACTION_MARK}' THEN
    SET v_xfree = NULL;
    SELECT 1 INTO v_xfree FROM ${n.xact} WHERE key_hash = v_hash FOR UPDATE SKIP LOCKED;
    IF v_xfree IS NULL THEN
      ${busy}
    END IF;
    -- Stale. Semaphore waiters queued behind the transaction keep the key a semaphore's.
    SET v_owner = IF(EXISTS (SELECT 1 FROM ${n.semQueue} WHERE key_hash = v_hash AND expires_at > v_now), '${SEMAPHORE_MARK}', ''), v_expires = v_now;
  END IF;`;
