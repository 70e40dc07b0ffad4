import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockMode } from '../interfaces/lock-options.interface.js';
import { LEASE_INTERNALS, type Lease } from './lease.js';
import type { LeaseContext } from './lease-context.js';
import type { LeaseGrants } from './lease-grants.js';
import type { LockRequest } from './lock-request.js';

/**
 * Acquiring a key this async context already holds (same backend) returns a reentrant handle on
 * that lease — with the settings the nested call asks for: a longer ttl or lockDelay, a watchdog
 * (or a longer maxHold), a longer lockAtLeastFor raise the lease to them before the nested work
 * starts (never lower it; see LeaseCore.raise). A lease found lost meanwhile rejects the call.
 * undefined: the context holds none of the request's keys (a fresh acquisition). Synchronous
 * unless the outer lease must be raised first.
 */
export function reenter(o: LockRequest, context: LeaseContext, grants: LeaseGrants): Lease | Promise<Lease> | undefined {
  const outer = o.keys ? context.covering(o.keys, o.backend) : context.reentrant(o.key, o.backend);
  if (!outer) {
    const own = o.keys?.find((key) => context.reentrant(key, o.backend));
    if (own !== undefined) {
      // Taking the rest while this context holds some would wait on itself (until its wait ran out).
      throw new InvalidLockOptionsError(
        'key',
        `this async context already holds "${own}" on backend "${o.backend}" but not all of ${JSON.stringify(o.keys)}: ` +
          'take every key in the outer acquisition, or none of them',
        o.where ?? `acquire(${JSON.stringify(o.keys)})`,
      );
    }
    return undefined;
  }
  if (outer.purpose !== o.purpose) {
    // One backend serves both purposes: inheriting would hand a '${o.purpose}' caller a lease
    // taken for another purpose, and a fresh acquisition would wait on this very context.
    throw new InvalidLockOptionsError(
      'purpose',
      `this async context already holds "${o.key}" for '${outer.purpose}' on backend "${o.backend}"; ` +
        `a nested '${o.purpose}' acquisition of the same key would wait on itself — use one purpose per key`,
      o.where ?? `acquire(${JSON.stringify(o.key)})`,
    );
  }
  const core = LEASE_INTERNALS.core(outer);
  if (core.permits !== o.permits) {
    throw new InvalidLockOptionsError(
      'permits',
      `this async context already holds "${o.key}" with permits ${core.permits}; a nested acquisition asks for ${o.permits}`,
      o.where ?? `acquire(${JSON.stringify(o.key)})`,
    );
  }
  const asked = o.mode ?? 'write';
  if (!covers(core.mode, asked)) {
    const instead = core.mode === 'upgradeable' ? 'upgrade() the outer lease first' : "take the outer lease with mode 'upgradeable' and upgrade() it";
    throw new InvalidLockOptionsError(
      'mode',
      `this async context holds "${o.key}" in mode '${core.mode}'; a nested '${asked}' acquisition of it would wait on itself — ${instead}`,
      o.where ?? `acquire(${JSON.stringify(o.key)})`,
    );
  }
  const raising = core.raise(o.ttl, o.policy);
  return raising ? raising.then(() => grants.reentrant(outer, o)) : grants.reentrant(outer, o);
}

/** Whether a lease held in mode `held` serves a nested acquisition in mode `asked`: a write covers every mode, an upgradeable read covers reads. */
function covers(held: LockMode, asked: LockMode): boolean {
  return held === 'write' || asked === 'read' || (held === 'upgradeable' && asked === 'upgradeable');
}
