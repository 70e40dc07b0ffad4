import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { Lease } from '../lease/lease.js';

/** Where fencing helpers find the leases of the current async context (`DistributedLockService`). */
export interface LeaseSource {
  /** The innermost lease of this async context. */
  current(): Lease | undefined;
  /**
   * Every lease of this async context, outermost first. With it the fence can tell which lease
   * protects a resource when leases are nested; a source without it supplies only `current()`.
   */
  currentLeases?(): readonly Lease[];
}

/**
 * The token a fenced operation on `resourceKey` carries.
 *
 * - Given explicitly: used as is (after checking it is a non-negative integer); if it belongs to a
 *   lease of this context that is already known lost, refused with that lease's `LeaseLostError`.
 * - Implicit: taken from the correctness leases of this async context. If any of them is known
 *   lost, the operation is refused with its `LeaseLostError`: work nested under a lost lease is no
 *   longer protected, whichever resource it touches. One lease: its token. Several (nested
 *   `using()` on different keys — their tokens come from one sequence, so the innermost is
 *   usually the NEWEST and would pass any fence): the lease whose key equals `resourceKey`, and
 *   if there is none, `InvalidLockOptionsError` asking for an explicit token.
 */
export function fenceToken(token: bigint | number | undefined, leases: LeaseSource | undefined, where: string, resourceKey?: string): bigint {
  const inContext = leases?.currentLeases?.() ?? (leases?.current() ? [leases.current()!] : []);
  if (token !== undefined) {
    if (typeof token === 'number' && !Number.isSafeInteger(token)) {
      throw new InvalidLockOptionsError('token', `must be a bigint or a safe integer, got ${token}`, where);
    }
    if ((typeof token !== 'bigint' && typeof token !== 'number') || BigInt(token) < 0n) {
      throw new InvalidLockOptionsError('token', `must be a non-negative bigint, got ${String(token)}`, where);
    }
    const given = BigInt(token);
    const own = inContext.find((lease) => lease.token === given && lease.signal.aborted);
    if (own) throw own.signal.reason;
    return given;
  }
  if (inContext.length === 0) {
    throw new InvalidLockOptionsError(
      'token',
      'none given and no lease in this async context: call inside using() / @DistributedLock, or pass lease.token',
      where,
    );
  }
  const fencing = inContext.filter((lease) => lease.token !== undefined);
  if (fencing.length === 0) {
    const lease = inContext[inContext.length - 1];
    throw new InvalidLockOptionsError(
      'token',
      `the current lease on "${lease.key}" (${lease.purpose}, backend "${lease.backend}") has no fencing token; use purpose 'correctness'`,
      where,
    );
  }
  const lost = fencing.find((lease) => lease.signal.aborted);
  if (lost) throw lost.signal.reason;
  const tokens = new Set(fencing.map((lease) => lease.token!)); // reentrant handles share a token
  if (tokens.size === 1) return fencing[0].token!;
  const onKey = fencing.filter((lease) => lease.key === resourceKey);
  if (onKey.length > 0) return onKey[onKey.length - 1].token!;
  throw new InvalidLockOptionsError(
    'token',
    `${tokens.size} correctness leases in this async context (${[...new Set(fencing.map((l) => JSON.stringify(l.key)))].join(', ')}) and none ` +
      `on ${resourceKey === undefined ? 'this resource' : JSON.stringify(resourceKey)}: pass the token of the lease that protects it`,
    where,
  );
}

/** A UTF-16 surrogate not paired with its other half (with the u flag, pairs read as one code point). */
const LONE_SURROGATE = /\p{Cs}/u;

/** A resource key for a fence: a non-empty, well-formed string (a lone surrogate would collide or fail to encode). */
export function checkResourceKey(key: unknown, where: string): string {
  if (typeof key !== 'string' || key.length === 0) throw new InvalidLockOptionsError('key', 'must be a non-empty string', where);
  if (LONE_SURROGATE.test(key)) {
    throw new InvalidLockOptionsError('key', 'contains a lone UTF-16 surrogate (not valid Unicode; it cannot be stored distinctly)', where);
  }
  return key;
}
