import { ReaderBackend } from '../backends/read-write.util.js';
import { monotonicNow } from '../common/validity.util.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { LeaseLostError } from '../errors/lease-lost.error.js';
import type { LeaseCore } from './lease-core.js';
import { sleepUnlessAborted } from './signals.util.js';

/** The longest delay a Node timer takes (longer ones fire at once). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The upgrade in progress of a lease: a second `upgrade()` call waits for the same one. */
const pending = new WeakMap<LeaseCore, Promise<void>>();

/**
 * `lease.upgrade()`: an upgradeable read becomes the write lease without the key ever being free
 * (LockBackend.upgrade). Each try goes through the lease's ordered calls, never beside an extend
 * of the same hold; between tries the lease waits first in the key's line — readers that come now
 * queue behind it — until the other readers leave, its signal aborts (lost, shutdown: the upgrade
 * rejects with that `LeaseLostError`) or it is released (`LeaseLostError`, `'not-owner'`). Resolves
 * at once for a lease upgraded already. `released` settles when the handle is released.
 */
export function upgradeLease(core: LeaseCore, released: Promise<void>): Promise<void> {
  const backend = core.backend;
  if (!(backend instanceof ReaderBackend) || core.mode === 'read') {
    const mode = core.permits > 1 ? `a semaphore's (permits ${core.permits})` : core.mode === 'write' ? "'write' (it holds the key alone already)" : `'${core.mode}'`;
    return Promise.reject(
      new InvalidLockOptionsError('mode', `upgrade() needs a lease taken with mode: 'upgradeable'; this lease of "${core.key}" is ${mode}`, `upgrade() of "${core.key}"`),
    );
  }
  if (!backend.reading) return Promise.resolve();
  let upgrading = pending.get(core);
  if (!upgrading) {
    upgrading = upgradeUntilDone(core, backend, released).finally(() => pending.delete(core));
    pending.set(core, upgrading);
  }
  return upgrading;
}

async function upgradeUntilDone(core: LeaseCore, backend: ReaderBackend, released: Promise<void>): Promise<void> {
  const stop = new AbortController();
  const signal = core.controller.signal;
  const onLoss = (): void => stop.abort(signal.reason);
  if (signal.aborted) onLoss();
  else signal.addEventListener('abort', onLoss, { once: true });
  void released.then(() => stop.abort(new LeaseLostError(core.key, 'not-owner', 'the lease was released while its upgrade waited')));
  try {
    for (let failures = 0; ; ) {
      stop.signal.throwIfAborted();
      try {
        let sentAt = 0;
        const result = await core.calls.send(() => {
          if (core.state !== 'held') throw core.lost ?? new LeaseLostError(core.key, 'not-owner', `the lease was ${core.state}`);
          sentAt = monotonicNow();
          return backend.upgrade(core.key, core.owner, core.ttlMs + core.lockDelayMs);
        });
        if (result.upgraded) {
          core.upgraded(result.token, sentAt);
          return;
        }
        if (!result.held) {
          core.lose('not-owner', 'the backend no longer has this owner on the key');
          throw core.lost ?? new LeaseLostError(core.key, 'not-owner', 'the backend no longer has this owner on the key');
        }
        // First in line now: the release of the last other reader wakes it (or its expiry passes).
        await backend.waitForUpgrade(core.key, core.owner, Math.min(Math.max(1, core.remainingMs()), MAX_TIMER_MS), stop.signal);
        failures = 0;
      } catch (error) {
        if (stop.signal.aborted) throw stop.signal.reason;
        if (error instanceof LeaseLostError) throw error;
        // The backend did not answer (an outage): the read still holds, and its place first in
        // line stays — try again, 50 ms doubling to 1 s, until the lease itself ends (its ttl, or
        // the watchdog's renewals failing), which rejects the upgrade with that LeaseLostError.
        await sleepUnlessAborted(Math.min(1_000, 50 * 2 ** failures++), stop.signal);
      }
    }
  } finally {
    signal.removeEventListener('abort', onLoss);
  }
}
