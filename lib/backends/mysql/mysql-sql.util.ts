import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';

/** The owner of a key's row that marks a semaphore (owner ids never start with '!'). */
export const SEMAPHORE_MARK = '!sem';
/** The owner of a key's row while a transaction holds the key (MySqlTransactionLock). */
export const TRANSACTION_MARK = '!xact';

/** The backend's tables and procedures for one table prefix (validated: a plain identifier), quoted. */
export interface MySqlNames {
  readonly held: string;
  readonly queue: string;
  readonly mail: string;
  readonly listeners: string;
  readonly acquire: string;
  readonly release: string;
  readonly forceRelease: string;
  readonly semHeld: string;
  readonly semQueue: string;
  readonly semAcquire: string;
  readonly semRelease: string;
  readonly semExtend: string;
  readonly xact: string;
  readonly xactGrants: string;
  readonly xactUsed: string;
  readonly xactRetire: string;
  readonly xactPrepare: string;
  readonly xactClaim: string;
  readonly xactSweep: string;
  /** The GET_LOCK name under which concurrent start-ups create the schema one at a time (per database). */
  readonly setupLock: string;
}

export function mysqlNames(prefix: string): MySqlNames {
  const q = (suffix: string): string => `\`${prefix}_${suffix}\``;
  return {
    held: q('held'),
    queue: q('queue'),
    mail: q('mail'),
    listeners: q('listeners'),
    acquire: q('acquire_v3'),
    release: q('release_v2'),
    forceRelease: q('force_release_v3'),
    semHeld: q('sem_held'),
    semQueue: q('sem_queue'),
    semAcquire: q('sem_acquire_v2'),
    semRelease: q('sem_release_v1'),
    semExtend: q('sem_extend_v1'),
    xact: q('xact'),
    xactGrants: q('xact_grants'),
    xactUsed: q('xact_used'),
    xactRetire: q('xact_retire_v1'),
    xactPrepare: q('xact_prepare_v2'),
    xactClaim: q('xact_claim_v2'),
    xactSweep: q('xact_sweep_v2'),
    setupLock: `${prefix}.setup`,
  };
}

/**
 * A key or owner as the bytes of its UTF-8: sent as a binary string, so the server stores and
 * hashes the same bytes whatever the connection's character set (two processes whose pools differ
 * in charset still name the same row).
 */
export const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/** A VARBINARY column read back as text. */
export const text = (value: unknown): string => (Buffer.isBuffer(value) ? value.toString('utf8') : String(value));

/** The longest key the lease row holds: 3,072 bytes of UTF-8 (InnoDB's index limit; 1,024 characters of up to 3 bytes). */
const MAX_KEY_BYTES = 3072;

/** A key longer than the row can hold (only possible through a backend used directly): refused before anything is sent. */
export function refuseUnstorable(key: string, where: string): void {
  if (Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) throw new InvalidLockOptionsError('key', `must be at most ${MAX_KEY_BYTES} bytes of UTF-8`, where);
}

/** A LIKE pattern (ESCAPE '!') matching every key that starts with `prefix`, as bytes. */
export function prefixPattern(prefix: string): Buffer {
  return Buffer.concat([bytes(prefix.replace(/[!%_]/g, '!$&')), Buffer.from('%')]);
}

/** The rows an UPDATE matched: the server's "Rows matched: N", sent whatever the client's flags; else affectedRows. */
export function matchedRows(header: { info?: string; affectedRows?: number } | undefined): number {
  const info = /Rows matched: (\d+)/.exec(header?.info ?? '');
  return info ? Number(info[1]) : (header?.affectedRows ?? 0);
}

/** The first row of a CALL's answer (`[[rows, …], header]`) or of a SELECT's (`[rows, fields]`). */
export function firstRow(result: [unknown, unknown]): Record<string, unknown> {
  const [first] = result;
  if (!Array.isArray(first)) return {};
  const rows = Array.isArray(first[0]) ? first[0] : first;
  return (rows[0] as Record<string, unknown> | undefined) ?? {};
}

/** Every row of a SELECT's answer. */
export function allRows(result: [unknown, unknown]): Array<Record<string, unknown>> {
  return Array.isArray(result[0]) ? (result[0] as Array<Record<string, unknown>>) : [];
}
