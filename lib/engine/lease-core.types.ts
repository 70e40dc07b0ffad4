import type { LockMode } from '../interfaces/lock-options.interface.js';
import type { LockBackend } from '../backends/lock-backend.interface.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LeaseLostError } from '../errors/lease-lost.error.js';
import type { LeasePolicy } from './lease-policy.js';
import type { LockKind } from './lock-events.js';

// The types of lease-core.ts, generic in the lease they describe (`Core` is always LeaseCore:
// this file cannot import it without an import cycle).

/** How a lease tells its engine what happened to it. */
export interface LeaseObserverOf<Core> {
  lost(core: Core, error: LeaseLostError): void;
  /** The lease is over (released or lost and cleaned up); forget it. */
  ended(core: Core): void;
  released(core: Core, wasOwner: boolean): void;
  renewed(core: Core): void;
  renewalFailed(core: Core, error: unknown): void;
  /** A release of the key went out (settles when the backend answered). */
  releasing?(core: Core, done: Promise<void>): void;
  /** Shut down with work still running under it, and that work outlived the lease's validity. */
  workOutlivedShutdown?(core: Core): void;
}

export type LeaseState = 'held' | 'released' | 'lost';

export interface LeaseCoreInit<Core> {
  key: string;
  /** A multi-key lease's keys, sorted (`key` is the first); absent for one key. */
  keys?: readonly string[];
  purpose: LockPurpose;
  token: bigint | undefined;
  backend: LockBackend;
  /** The name the module routes by (`backends: { name: … }`), which events and handles report. */
  backendName: string;
  /** 1 for a lock; the semaphore's permits otherwise (`backend` is then `withPermits(backend, permits)`). */
  permits: number;
  /** A read-write lock's mode (`backend` is then a ReaderBackend for a reader); 'write' for every other lease. */
  mode: LockMode;
  kind: LockKind;
  owner: string;
  ttlMs: number;
  /** Monotonic time until which the grant may be trusted. */
  validUntilMs: number;
  driftFactor: number;
  policy: LeasePolicy;
  observer: LeaseObserverOf<Core>;
}
