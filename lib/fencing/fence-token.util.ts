import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { Lease } from '../engine/lease.js';
import { LEASE_INTERNALS } from '../engine/lease.js';

/** Where fencing helpers find the leases of the current async context (`DistributedLockService`). */
export interface LeaseSource {
  /** The innermost lease of this async context. */
  current(): Lease | undefined;
  /**
   * Every lease of this async context, outermost first (the service has it). Without it the
   * fence sees only `current()`, the innermost lease.
   */
  currentLeases?(): readonly Lease[];
}

/**
 * The token a fenced operation carries.
 *
 * - Given explicitly: used as is (after checking it is a non-negative integer); the resource's
 *   fence decides.
 * - Implicit: the token of the lease in this async context on `lockKey` — the lock that protects
 *   the resource (by default the resource's own key). Only that lease: tokens of different keys
 *   come from one sequence, so another lease's (an inner lease's, usually the newest) would pass
 *   any fence and lose a newer holder's update. No such lease: `InvalidLockOptionsError` asking
 *   for an explicit token. If any correctness lease of the context is known lost, refused with its
 *   `LeaseLostError`: work nested under a lost lease is no longer protected.
 */
export function fenceToken(token: bigint | number | undefined, leases: LeaseSource | undefined, where: string, lockKey?: string): bigint {
  if (token !== undefined) {
    if (typeof token === 'number' && !Number.isSafeInteger(token)) {
      throw new InvalidLockOptionsError('token', `must be a bigint or a safe integer, got ${token}`, where);
    }
    if ((typeof token !== 'bigint' && typeof token !== 'number') || BigInt(token) < 0n) {
      throw new InvalidLockOptionsError('token', `must be a non-negative bigint, got ${String(token)}`, where);
    }
    // The caller's choice: the resource's fence decides (a holder that does not know yet that its
    // lease is gone is exactly the case the fence exists for).
    return BigInt(token);
  }
  const inContext = leasesOf(leases);
  if (inContext.length === 0) {
    throw new InvalidLockOptionsError(
      'token',
      'none given and no lease in this async context: call inside using() / @DistributedLock, or pass lease.token',
      where,
    );
  }
  const lost = inContext.find((lease) => lease.token !== undefined && LEASE_INTERNALS.lostWith(lease));
  if (lost) throw LEASE_INTERNALS.lostWith(lost);
  const protecting = lockKey === undefined ? undefined : inContext.findLast((lease) => lease.keys.includes(lockKey));
  if (!protecting) {
    throw new InvalidLockOptionsError(
      'token',
      `none given and no lease on ${lockKey === undefined ? 'the lock key of this resource (set lockKey)' : JSON.stringify(lockKey)} ` +
        `in this async context (held here: ${inContext.map((l) => l.keys.map((k) => JSON.stringify(k)).join(' + ')).join(', ')}): lock the resource's own key, ` +
        `map it with the fence's lockKey option, or pass lease.token`,
      where,
    );
  }
  if (protecting.token === undefined) {
    throw new InvalidLockOptionsError(
      'token',
      `the lease on "${protecting.key}" (${protecting.purpose}, backend "${protecting.backend}") has no fencing token; use purpose 'correctness'`,
      where,
    );
  }
  if (protecting.signal.aborted) throw protecting.signal.reason;
  return protecting.token;
}

/** Whether an implicit token would be found for `lockKey` (a fenced read is plain without one). */
export function hasLeaseOn(leases: LeaseSource | undefined, lockKey: string | undefined): boolean {
  return lockKey !== undefined && leasesOf(leases).some((lease) => lease.keys.includes(lockKey) && lease.token !== undefined);
}

/** The leases of this async context; a source with only `current()` shows the innermost one. */
function leasesOf(leases: LeaseSource | undefined): readonly Lease[] {
  if (!leases) return [];
  if (typeof leases.currentLeases === 'function') return leases.currentLeases();
  const current = leases.current();
  return current ? [current] : [];
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
