import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockMode } from '../interfaces/lock-options.interface.js';
import type { LeasePolicy } from './lease-policy.js';
import type { LockKind } from './lock-events.js';

/**
 * One acquisition, validated: what the engine needs, whoever asks (`acquire()`, `using()`, a
 * decorated method). The options layer produces it; the engine never reads user input.
 */
export interface LockRequest {
  /** The key (a multi-key request's first). */
  key: string;
  /** A multi-key request: its keys, sorted and distinct, at least two — one lease over all. */
  keys?: readonly string[];
  purpose: LockPurpose;
  /** How long the lease may be trusted, in ms. */
  ttl: number;
  /** How long to wait while another owner holds the key, in ms (0: one attempt; Infinity: a campaign's). */
  wait: number;
  /** The configured backend that serves it. */
  backend: string;
  /** At most this many holders of the key at once: 1 is a lock, more a semaphore. */
  permits: number;
  /** A read-write lock's mode: `'write'` is the plain lock (absent: `'write'`). */
  mode?: LockMode;
  /** A leader's campaign (`campaign()`): reported as kind 'leader'. */
  campaign?: boolean;
  policy: LeasePolicy;
  /** Stops the wait (and gives back a grant that comes anyway). */
  signal?: AbortSignal;
  /** Who asks, for messages: `acquire("k")`, `Class.method`. */
  where?: string;
}

/** The kind of lease a request asks for (events and metrics tell them apart). */
export function kindOf(o: LockRequest): LockKind {
  if (o.campaign) return 'leader';
  if (o.keys) return 'multi-key';
  return o.permits > 1 ? 'semaphore' : 'lock';
}

/** What the engine does when the key stays held by another owner: throw `LockBusyError`, or skip. */
export type WhenBusy = 'throw' | 'skip';

/** `runLocked()`'s result when the key was busy and the request said `'skip'`. */
export const SKIPPED: unique symbol = Symbol('nest-distributed-lock:skipped');
