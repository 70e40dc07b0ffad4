import { describeValue } from './redact.util.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { driftAllowanceMs } from './validity.util.js';

/** The `where` of every error about `forRoot()` / `forRootAsync()` options. */
export const MODULE_OPTIONS = 'DistributedLockModule options';

/** Refuse a module option: the error names the field. */
export function failOption(field: string, problem: string, where = MODULE_OPTIONS): never {
  throw new InvalidLockOptionsError(field, problem, where);
}

export const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Refuse any field of `obj` not in `known`; the error names it as `path + field`. */
export function rejectUnknown(obj: Record<string, unknown>, known: readonly string[], path: string, where = MODULE_OPTIONS): void {
  for (const field of Object.keys(obj)) {
    if (!known.includes(field)) failOption(path + field, `unknown option (known: ${known.join(', ')})`, where);
  }
}

/** Longest time a timer can wait (2^31 − 1 ms, about 24.8 days). */
const MAX_MS = 2_147_483_647;

/** A positive number of milliseconds (finite, integer, at most about 24.8 days). */
export function checkPositiveMs(value: unknown, field: string, where?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0 || value > MAX_MS) {
    throw new InvalidLockOptionsError(field, `must be a positive integer number of milliseconds, got ${String(value)}`, where);
  }
  return value;
}

/** Zero or a positive number of milliseconds (finite, integer). */
export function checkNonNegativeMs(value: unknown, field: string, where?: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_MS) {
    throw new InvalidLockOptionsError(field, `must be 0 or a positive integer number of milliseconds, got ${String(value)}`, where);
  }
  return value;
}

/** The module's default `driftFactor`, also what a backend built by hand assumes. */
export const DEFAULT_DRIFT_FACTOR = 0.01;

/**
 * Validity a lease must keep after the drift allowance (`floor(ttl × driftFactor) + 2` ms): a
 * shorter one is spent by one event-loop hiccup, and at zero every grant is already expired when
 * it arrives, so a waiter would spin acquire/release until its deadline.
 */
export const MIN_VALIDITY_MS = 10;

/** The smallest ttl that leaves `MIN_VALIDITY_MS` of validity with this drift factor (< 0.5). */
export function minTtlMs(driftFactor: number): number {
  // ttl − floor(ttl × f) never decreases as ttl grows (f < 1), so the first ttl that fits is the minimum.
  let ttl = MIN_VALIDITY_MS + 2;
  while (ttl - driftAllowanceMs(ttl, driftFactor) < MIN_VALIDITY_MS) ttl++;
  return ttl;
}

/** A lease ttl: positive whole ms that leaves at least `MIN_VALIDITY_MS` after the drift allowance. */
export function checkTtl(value: unknown, field: string, driftFactor: number, where?: string): number {
  const ttl = checkPositiveMs(value, field, where);
  const min = minTtlMs(driftFactor);
  if (ttl < min) {
    throw new InvalidLockOptionsError(
      field,
      `must be at least ${min} ms, got ${ttl}: a lease is trusted for its ttl minus the drift allowance ` +
        `(floor(ttl × driftFactor ${driftFactor}) + 2 ms), and must keep ${MIN_VALIDITY_MS} ms of that`,
      where,
    );
  }
  return ttl;
}

/** A UTF-16 surrogate not part of a pair: no UTF-8 encoding (Redis stores U+FFFD, etcd throws). */
export const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/** A key prefix: a string with a UTF-8 encoding. */
export function checkPrefix(prefix: unknown, field: string, where = MODULE_OPTIONS): string {
  if (typeof prefix !== 'string') failOption(field, 'must be a string', where);
  if (!isWellFormed(prefix)) failOption(field, 'must not contain a lone UTF-16 surrogate (it has no UTF-8 encoding)', where);
  return prefix;
}

/** A plain lower-case SQL identifier (a-z, 0-9, _; at most 40): spliced into DDL, so nothing else. */
export function checkSqlIdentifier(value: unknown, field: string, where = MODULE_OPTIONS): string {
  if (typeof value !== 'string' || !/^[a-z_][a-z0-9_]{0,39}$/.test(value)) {
    failOption(field, `must be a lower-case SQL identifier (a-z, 0-9, _; at most 40 characters), got ${describeValue(value)}`, where);
  }
  return value;
}
