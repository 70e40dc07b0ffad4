import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';

/**
 * Names and SQL expressions the PostgreSQL backend's statements share (postgres.sql.ts,
 * postgres-fast.sql.ts): schema-qualified object names, a key's advisory lock ids, tokens.
 */

/** A validated SQL identifier, quoted. */
export const q = (identifier: string): string => `"${identifier}"`;

export interface PostgresNames {
  /** Schema of the tables and functions. */
  readonly schema: string;
  /** Prefix of their names. */
  readonly prefix: string;
}

/** Schema-qualified names of the backend's objects (quoted). */
export function objectNames({ schema, prefix }: PostgresNames) {
  const name = (suffix: string): string => `${q(schema)}.${q(`${prefix}_${suffix}`)}`;
  return {
    held: name('held'),
    queue: name('queue'),
    tokens: name('tokens'),
    arrivals: name('arrivals'),
    /** The lease acquire: v3 also refuses a key held or awaited as a semaphore (answers its permits). */
    acquire: name('acquire_v3'),
    /** v2 (yields to a transaction lock, PgTransactionLock, like v3) and v1: still created for instances of earlier versions during a rolling deploy (see docs/backends/postgresql.md). */
    acquireV2: name('acquire_v2'),
    acquireV1: name('acquire_v1'),
    release: name('release_v1'),
    extend: name('extend_v1'),
    /** An operator's forceRelease(): the holder's release, made for it, and a '!lost <owner>' NOTIFY; v2 ends every holder of a semaphore. */
    forceRelease: name('force_release_v2'),
    forceReleaseV1: name('force_release_v1'),
    /** A semaphore's holders (key, owner: own expiry, token, the permits they agreed on) and its FIFO queue. */
    semHeld: name('sem_held'),
    semQueue: name('sem_queue'),
    semAcquire: name('sem_acquire_v1'),
    semRelease: name('sem_release_v1'),
    semExtend: name('sem_extend_v1'),
    /** PgTransactionLock's acquire, run inside the caller's transaction. */
    xactAcquire: name('xact_acquire_v1'),
    /** NOTIFY channel (an identifier, unquoted for LISTEN it is quoted too). */
    channel: `${prefix}_wake`,
  };
}

/**
 * The owner of a key's lease row while a semaphore holds or awaits it (a plain owner id never starts
 * with '!'): the row's expiry is the latest of the semaphore's holders and waiters, so the plain
 * one-statement insert finds the key taken (no extra check on that path) and the plain function
 * reads it as a semaphore.
 */
export const SEMAPHORE_MARK = '!semaphore';

/**
 * The advisory lock id of a key (`key` is an SQL expression): seed 0 serialises the backend's
 * calls on the key; seed 1 is its transaction lock (PgTransactionLock). One namespace per schema
 * and prefix.
 */
export const lockId = (names: PostgresNames, key: string, seed: 0 | 1): string => `hashtextextended('${names.schema}.${names.prefix}:' || ${key}, ${seed})`;

/** The WAL timeline, shifted above the sequence's values. */
export const timeline = `(('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint << 44)`;

/** A new token: the WAL timeline above a durable sequence's next value. */
export const newToken = (n: ReturnType<typeof objectNames>): string => `(${timeline} + nextval('${n.tokens}'))`;

/**
 * Every token issued so far is at most this (the sequence's last value, non-transactional, under
 * the current timeline); every token issued later is above it. A busy answer carries it: a
 * hand-off message whose token is not above it was sent for a grant made before the answer —
 * one that has ended since, or the answer would have claimed it.
 */
export const issuedSoFar = (n: ReturnType<typeof objectNames>): string => `(${timeline} + (SELECT s.last_value FROM ${n.tokens} s))`;

/**
 * PostgreSQL text cannot hold U+0000: such a key is bad input, refused before anything is sent
 * (the server's "invalid byte sequence" would otherwise read as an outage).
 */
export function refuseNul(key: string, where: string, field = 'key'): void {
  if (key.includes('\0')) throw new InvalidLockOptionsError(field, 'must not contain U+0000 (NUL) on PostgreSQL, whose text type cannot hold it', where);
}

/**
 * Most UTF-8 bytes of a key on PostgreSQL: the key is (part of) a btree index's entry, and an entry
 * may not pass ~2,700 bytes (a third of a page) — a longer key failed at the server with "index row
 * size … exceeds btree version 4 maximum 2704", as an outage to retry. Left: room for the owner id
 * beside it in the queue's (key, owner) index. 1024 characters fit unless most of them take three
 * bytes (CJK and other text above U+07FF): from 834 such characters on, a key is refused here.
 */
export const PG_KEY_MAX_BYTES = 2_500;

/** A key PostgreSQL can hold: no NUL, at most PG_KEY_MAX_BYTES of UTF-8. */
export function refuseUnstorable(key: string, where: string): void {
  refuseNul(key, where);
  // Cheap first: fewer UTF-16 units than a third of the bound can never exceed it.
  if (key.length * 3 > PG_KEY_MAX_BYTES && Buffer.byteLength(key, 'utf8') > PG_KEY_MAX_BYTES) {
    throw new InvalidLockOptionsError('key', `must be at most ${PG_KEY_MAX_BYTES} bytes of UTF-8 on PostgreSQL (its index entries are bounded), got ${Buffer.byteLength(key, 'utf8')}`, where);
  }
}
