import { Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import { LOGGER_CONTEXT } from '../distributed-lock.constants.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';

/** What a lease is: a lock on one key, a semaphore permit, one lease over several keys, a leader's term. */
export type LockKind = 'lock' | 'semaphore' | 'multi-key' | 'leader';

interface LockEventBase {
  /** The key (a multi-key lease's first). */
  key: string;
  purpose: LockPurpose;
  backend: string;
  kind: LockKind;
}

/** Lifecycle events of `DistributedLockService.events`. */
export interface LockEventMap {
  acquired: [LockEventBase & { token?: bigint; waitedMs: number; reentrant: boolean }];
  busy: [LockEventBase & { waitedMs: number }];
  /** `wasOwner: false`: the key had already expired or passed to someone else. */
  released: [LockEventBase & { heldMs: number; wasOwner: boolean }];
  'release-failed': [LockEventBase & { error: unknown }];
  /** The watchdog renewed the lease. */
  renewed: [LockEventBase & { remainingMs: number }];
  /** A watchdog renewal failed; the lease is still valid for a while and will be retried. */
  'renewal-failed': [LockEventBase & { error: unknown }];
  lost: [LockEventBase & { error: Error }];
  /** This process called `forceRelease()`; `released: false`: nobody held the key. */
  'force-released': [{ key: string; backend: string; released: boolean }];
}

export type LockEventName = keyof LockEventMap;

const logger = new Logger(LOGGER_CONTEXT);

/**
 * A typed EventEmitter of lock lifecycle events. Listeners run synchronously on the lock path, so
 * each one is isolated: a listener that throws is logged and skipped — the other listeners still
 * run, and the lock's outcome never changes. An async listener's rejection is logged the same way.
 */
export class LockEvents extends EventEmitter<LockEventMap> {
  override emit(eventName: LockEventName, ...args: unknown[]): boolean {
    const listeners = this.rawListeners(eventName) as Array<(...a: unknown[]) => void>;
    if (listeners.length === 0) return false;
    const report = (error: unknown): void =>
      logger.error(`A "${eventName}" listener threw; the lock is not affected: ${(error as Error)?.stack ?? error}`);
    for (const listener of listeners) {
      try {
        const result = listener.apply(this, args) as unknown;
        // An async listener's rejection is reported too, never left unhandled (it would end the process).
        if (typeof (result as PromiseLike<unknown> | undefined)?.then === 'function') (result as PromiseLike<unknown>).then(undefined, report);
      } catch (error) {
        report(error);
      }
    }
    return true;
  }
}
