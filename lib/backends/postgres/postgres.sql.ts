/**
 * The PostgreSQL backend's schema and statements. A lock is a lease row with an expiry on the
 * database's own clock; every operation is one statement (one round trip, one transaction): a
 * plain INSERT or DELETE when the key is uncontended (fastStatements), else a call of a PL/pgSQL
 * function, serialised per key by a transaction-scoped advisory lock. Values travel as
 * parameters; only the validated schema and table prefix are spliced in, quoted.
 *
 * Tokens: `(WAL timeline << 44) + nextval(tokens)`. The sequence is durable and never goes back
 * across a restart or a crash (it may skip ahead). The timeline makes tokens keep growing across a
 * failover to an asynchronous replica too: grants the replica had not received are lost with the
 * old primary — their sequence values may be issued again — but a promotion starts a new, larger
 * timeline, so every token issued after it is larger than any issued before.
 *
 * Fairness: waiters queue by arrival, each with the ttl it asked for; a free key goes to the head
 * of the queue. A release (or an acquire that finds the key free while others wait first) grants
 * the key to the head waiter for its ttl and NOTIFYs it with the token; the waiter starts without
 * a claim of its own. A waiter whose process died drops out when its entry expires (it refreshes
 * it every heartbeat). A waiter marks the key's row (`waiting`), so its holder's release takes the
 * function that hands the key on.
 *
 * Transaction locks (PgTransactionLock): a second advisory lock per key (another hash seed), held
 * by the caller's transaction until it ends. Lease acquires (v2, v3, and the fast insert) try it
 * before any grant and hold it to their commit; they never wait for it, so a transaction delays
 * no lease call. v3 also refuses a key a semaphore holds (postgres-semaphore.sql.ts). v1 and v2
 * stay created for instances of previous versions during a rolling deploy.
 */

import { xactAcquireFunction } from './pg-transaction-lock.sql.js';
import { semaphoreSetup, semaphorePermits } from './postgres-semaphore.sql.js';
import { issuedSoFar, lockId, newToken, objectNames, q, SEMAPHORE_MARK, type PostgresNames } from './postgres-sql.util.js';

/**
 * A table made before `column` existed gains it. Checked first, so a start-up takes no exclusive
 * lock on a table in use (a PgTransactionLock transaction reads `held` until it ends).
 */
const addColumn = (table: string, column: string, type: string): string => `DO $do$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '${table}'::regclass AND attname = '${column}' AND NOT attisdropped) THEN
        ALTER TABLE ${table} ADD COLUMN ${column} ${type};
      END IF;
    END $do$`;

/** Statements that create what the backend needs, if absent (idempotent; run at start-up). */
export function setupStatements(names: PostgresNames): string[] {
  const n = objectNames(names);
  // The advisory lock key of a lock key: one namespace for this backend's objects.
  const advisory = `pg_advisory_xact_lock(${lockId(names, 'p_key', 0)})`;
  // The transaction lock of a key: held by a PgTransactionLock's transaction until it ends, and for
  // the length of their call by lease acquires (v2) that grant. Another hash seed: another lock.
  const txLock = lockId(names, 'p_key', 1);
  const token = newToken(n);
  const purge = `DELETE FROM ${n.queue} WHERE key = p_key AND expires_at <= v_now;`;
  // Whether anyone but `owner` waits for the key: the new row's \`waiting\`.
  const othersWait = (owner: string): string => `EXISTS (SELECT 1 FROM ${n.queue} o WHERE o.key = p_key AND o.owner <> ${owner})`;
  // Grant a free key to the head waiter for the ttl it asked for and wake it: "<owner> <ms>
  // <token>" — it starts at once, no claim round trip. A waiter of an earlier version queued
  // without a ttl: the key is reserved for it for p_life_ms, and it claims the rest.
  const handOff = `
    DELETE FROM ${n.queue} WHERE key = p_key AND owner = v_head;
    v_head_ms := COALESCE(v_head_ms, p_life_ms);
    INSERT INTO ${n.held} AS h (key, owner, token, expires_at, waiting)
      VALUES (p_key, v_head, ${token}, v_now + v_head_ms * interval '1 millisecond', ${othersWait('v_head')})
      ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at, waiting = EXCLUDED.waiting
      RETURNING h.token INTO v_token;
    PERFORM pg_notify('${n.channel}', v_head || ' ' || v_head_ms || ' ' || v_token);`;
  // A waiter marks the key's row (if any): its holder's release must then take the full path.
  const joinQueue = `INSERT INTO ${n.queue} AS qq (key, owner, arrived, expires_at, ttl_ms)
          VALUES (p_key, p_owner, nextval('${n.arrivals}'), v_now + p_life_ms * interval '1 millisecond', p_ttl_ms)
          ON CONFLICT (key, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at, ttl_ms = EXCLUDED.ttl_ms;
        UPDATE ${n.held} h SET waiting = true WHERE h.key = p_key AND NOT h.waiting;`;
  // acquire: (acquired, token, holder_ms). Claims a reservation made for p_owner; takes a free
  // key when nobody waits before p_owner; otherwise (p_queue) joins or refreshes the queue.
  // v3 (`semaphores`) answers a fourth column, permits: set when a semaphore holds or awaits the
  // key (its lease row is the mark, SEMAPHORE_MARK) — the caller is refused, nothing is written.
  const acquireFunction = (fnName: string, guard: string, semaphores = false): string => {
  const x = semaphores ? ', NULL::integer' : '';
  return `CREATE OR REPLACE FUNCTION ${fnName}(p_key text, p_owner text, p_ttl_ms bigint, p_queue boolean, p_life_ms bigint)
    RETURNS TABLE (acquired boolean, token bigint, holder_ms bigint${semaphores ? ', permits integer' : ''}) LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      v_now timestamptz;
      v_held ${n.held}%ROWTYPE;
      v_head text;
      v_head_ms bigint;
      v_token bigint;${semaphores ? '\n      v_permits integer;' : ''}
    BEGIN
      PERFORM ${advisory};
      v_now := clock_timestamp();
      SELECT * INTO v_held FROM ${n.held} h WHERE h.key = p_key;${semaphores ? `
      IF FOUND AND v_held.owner = '${SEMAPHORE_MARK}' AND v_held.expires_at > v_now THEN
        v_permits := ${semaphorePermits(n, 'v_now')};
        IF v_permits IS NOT NULL THEN
          RETURN QUERY SELECT false, NULL::bigint, NULL::bigint, v_permits;
          RETURN;
        END IF;
        v_held.expires_at := v_now; -- a mark nothing lives under: the key is free
      END IF;` : ''}
      IF FOUND AND v_held.expires_at > v_now THEN
        IF v_held.owner = p_owner THEN
          UPDATE ${n.held} h SET expires_at = v_now + p_ttl_ms * interval '1 millisecond' WHERE h.key = p_key;
          DELETE FROM ${n.queue} qq WHERE qq.key = p_key AND qq.owner = p_owner;
          RETURN QUERY SELECT true, v_held.token, NULL::bigint${x};
          RETURN;
        END IF;
      ELSE${guard}
        ${purge}
        SELECT qq.owner, qq.ttl_ms INTO v_head, v_head_ms FROM ${n.queue} qq WHERE qq.key = p_key ORDER BY qq.arrived LIMIT 1;
        IF v_head IS NULL OR v_head = p_owner THEN
          v_token := ${token};
          DELETE FROM ${n.queue} qq WHERE qq.key = p_key AND qq.owner = p_owner;
          INSERT INTO ${n.held} AS h (key, owner, token, expires_at, waiting)
            VALUES (p_key, p_owner, v_token, v_now + p_ttl_ms * interval '1 millisecond', ${othersWait('p_owner')})
            ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at, waiting = EXCLUDED.waiting;
          RETURN QUERY SELECT true, v_token, NULL::bigint${x};
          RETURN;
        END IF;
        ${handOff}
        SELECT * INTO v_held FROM ${n.held} h WHERE h.key = p_key;
      END IF;
      IF p_queue THEN
        ${joinQueue}
      END IF;
      -- Busy: with every token issued so far (see issuedSoFar) in the token column.
      RETURN QUERY SELECT false, ${issuedSoFar(n)}, GREATEST(0, floor(extract(epoch FROM v_held.expires_at - v_now) * 1000))::bigint${x};
    END
    $fn$`;
  };
  // v2: a transaction holding the key (PgTransactionLock) has its transaction lock; no lease is
  // granted past it — neither to the caller nor, by hand-off, to the head waiter. Tried only where
  // a grant would follow (a holder claiming or refreshing its own live row needs none: no
  // transaction gets past a live row). Only tried — never waited for — so no lease call queues
  // behind a transaction, and, taken after the per-key lock, never waits in a cycle with one.
  const transactionGuard = (x = ''): string => `
        IF NOT pg_try_advisory_xact_lock(${txLock}) THEN
          IF p_queue THEN
            ${joinQueue}
          END IF;
          RETURN QUERY SELECT false, ${issuedSoFar(n)}, NULL::bigint${x};
        RETURN;
      END IF;`;
  return [
    // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
    `DO $do$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '${names.schema}') THEN CREATE SCHEMA ${q(names.schema)}; END IF;
    END $do$`,
    `CREATE TABLE IF NOT EXISTS ${n.held} (
      key text PRIMARY KEY,
      owner text NOT NULL,
      token bigint NOT NULL,
      expires_at timestamptz NOT NULL,
      waiting boolean NOT NULL DEFAULT false
    )`,
    addColumn(n.held, 'waiting', 'boolean NOT NULL DEFAULT false'),
    `CREATE TABLE IF NOT EXISTS ${n.queue} (
      key text NOT NULL,
      owner text NOT NULL,
      arrived bigint NOT NULL,
      expires_at timestamptz NOT NULL,
      ttl_ms bigint,
      PRIMARY KEY (key, owner)
    )`,
    addColumn(n.queue, 'ttl_ms', 'bigint'),
    `CREATE INDEX IF NOT EXISTS ${q(`${names.prefix}_queue_order`)} ON ${n.queue} (key, arrived)`,
    `CREATE SEQUENCE IF NOT EXISTS ${n.tokens}`,
    `CREATE SEQUENCE IF NOT EXISTS ${n.arrivals}`,
    acquireFunction(n.acquireV1, ''),
    acquireFunction(n.acquireV2, transactionGuard()),
    acquireFunction(n.acquire, transactionGuard(', NULL::integer'), true),
    // release: true when p_owner held the key. Leaves the queue either way; a key it frees goes
    // to the next live waiter (reserved, woken).
    `CREATE OR REPLACE FUNCTION ${n.release}(p_key text, p_owner text, p_life_ms bigint)
    RETURNS boolean LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      v_now timestamptz;
      v_held ${n.held}%ROWTYPE;
      v_was boolean;
      v_head text;
      v_head_ms bigint;
      v_token bigint;
    BEGIN
      PERFORM ${advisory};
      v_now := clock_timestamp();
      DELETE FROM ${n.queue} qq WHERE qq.key = p_key AND qq.owner = p_owner;
      SELECT * INTO v_held FROM ${n.held} h WHERE h.key = p_key;
      IF NOT FOUND THEN
        RETURN false;
      END IF;
      v_was := v_held.owner = p_owner AND v_held.expires_at > v_now;
      IF v_held.owner <> p_owner AND v_held.expires_at > v_now THEN
        RETURN false;
      END IF;
      ${purge}
      SELECT qq.owner, qq.ttl_ms INTO v_head, v_head_ms FROM ${n.queue} qq WHERE qq.key = p_key ORDER BY qq.arrived LIMIT 1;
      IF v_head IS NULL THEN
        DELETE FROM ${n.held} h WHERE h.key = p_key AND h.owner = v_held.owner;
      ELSIF pg_try_advisory_xact_lock(${txLock}) THEN
        ${handOff}
      ELSE
        -- A transaction holds the key (PgTransactionLock): no hand-off past it. The waiters'
        -- re-checks take the key once it has ended.
        DELETE FROM ${n.held} h WHERE h.key = p_key AND h.owner = v_held.owner;
      END IF;
      RETURN v_was;
    END
    $fn$`,
    // extend: true when p_owner still holds the key (its expiry is now p_ttl_ms from now). Under the
    // key's lock like every grant: an acquire that read the old expiry in the lease's last moment
    // must not overwrite the row this extend renews (two holders).
    `CREATE OR REPLACE FUNCTION ${n.extend}(p_key text, p_owner text, p_ttl_ms bigint)
    RETURNS boolean LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    BEGIN
      PERFORM ${advisory};
      UPDATE ${n.held} h SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond'
        WHERE h.key = p_key AND h.owner = p_owner AND h.expires_at > clock_timestamp();
      RETURN FOUND;
    END
    $fn$`,
    // force_release: the live holder (NULL when free), released as it would release (the next
    // live waiter gets the key), and told on the channel: '!lost <owner>' (owner ids never
    // start with '!'). The advisory lock is taken again inside release: it is reentrant.
    `CREATE OR REPLACE FUNCTION ${n.forceReleaseV1}(p_key text, p_life_ms bigint)
    RETURNS text LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      v_owner text;
    BEGIN
      PERFORM ${advisory};
      SELECT h.owner INTO v_owner FROM ${n.held} h WHERE h.key = p_key AND h.expires_at > clock_timestamp();
      IF v_owner IS NULL THEN
        RETURN NULL;
      END IF;
      PERFORM ${n.release}(p_key, v_owner, p_life_ms);
      PERFORM pg_notify('${n.channel}', '!lost ' || v_owner);
      RETURN v_owner;
    END
    $fn$`,
    xactAcquireFunction(names),
    ...semaphoreSetup(names),
  ];
}
