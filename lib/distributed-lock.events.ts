import { EventEmitter } from 'node:events';
import type { LockPurpose } from './interfaces/distributed-lock-options.interface.js';

interface LockEventBase {
  key: string;
  purpose: LockPurpose;
  backend: string;
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
}

export type LockEventName = keyof LockEventMap;

/** A typed EventEmitter of lock lifecycle events. Listeners must not throw. */
export class LockEvents extends EventEmitter<LockEventMap> {}
