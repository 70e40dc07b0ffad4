import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { Lease } from '../lease/lease.js';

/** Where fencing helpers find the lease of the current async context (`DistributedLockService`). */
export interface LeaseSource {
  current(): Lease | undefined;
}

/**
 * The token a fenced operation carries: the one given, else the current lease's. Refuses when
 * there is none, when the lease has no token (not a fencing backend), or when the lease is
 * already known to be lost — the resource check stops the ones not yet known.
 */
export function fenceToken(token: bigint | number | undefined, leases: LeaseSource | undefined, where: string): bigint {
  if (token !== undefined) {
    if (typeof token === 'number' && !Number.isSafeInteger(token)) {
      throw new InvalidLockOptionsError('token', `must be a bigint or a safe integer, got ${token}`, where);
    }
    if ((typeof token !== 'bigint' && typeof token !== 'number') || BigInt(token) < 0n) {
      throw new InvalidLockOptionsError('token', `must be a non-negative bigint, got ${String(token)}`, where);
    }
    return BigInt(token);
  }
  const lease = leases?.current();
  if (!lease) {
    throw new InvalidLockOptionsError(
      'token',
      'none given and no lease in this async context: call inside using() / @DistributedLock, or pass lease.token',
      where,
    );
  }
  if (lease.token === undefined) {
    throw new InvalidLockOptionsError(
      'token',
      `the current lease on "${lease.key}" (${lease.purpose}, backend "${lease.backend}") has no fencing token; use purpose 'correctness'`,
      where,
    );
  }
  if (lease.signal.aborted) throw lease.signal.reason;
  return lease.token;
}
