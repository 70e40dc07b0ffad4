import type { OnBusy } from '../interfaces/distributed-lock-decorator-options.interface.js';
import type { DistributedLockOptions } from '../interfaces/distributed-lock-decorator-options.interface.js';
import type { CommonLockSettings } from '../options/lock-options.util.js';
import type { Lease } from '../engine/lease.js';
import { DistributedLockError } from '../errors/distributed-lock.error.js';

/**
 * Metadata key under which `@DistributedLock` records its declarations on the method: a list,
 * innermost first, so stacked declarations (and wrappers that copy metadata) keep every one.
 */
export const DISTRIBUTED_LOCK_METADATA = Symbol('nest-distributed-lock:declarations');

/** The declarations recorded on a method (empty when it has none). */
export function declarationsOf(method: unknown): readonly DecoratedMethod[] {
  if (typeof method !== 'function') return [];
  return (Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, method) as DecoratedMethod[] | undefined) ?? [];
}

/** What one `@DistributedLock` recorded: the raw options and where they sit. Its identity names the declaration. */
export interface DecoratedMethod {
  options: DistributedLockOptions;
  className: string;
  methodName: string;
}

/** A decorated method's options after bootstrap validation against the module's backends. */
export interface ResolvedMethodLock extends CommonLockSettings {
  /** `Class.method`, for messages. */
  where: string;
  key: string | ((...args: unknown[]) => string);
  onBusy: OnBusy;
}

/** What a decorated call needs from the lock engine (implemented by DistributedLockService). */
export interface DecoratedCallRunner {
  /**
   * The lease, or null when busy and `onBusy` is `'skip'`; throws `LockBusyError` otherwise.
   * `signal` (an Observable's unsubscription) stops the wait and gives back a late grant.
   */
  acquireForMethod(lock: ResolvedMethodLock, key: string, signal?: AbortSignal): Promise<Lease | null>;
  /** Run `fn` with `lease` as the current lease of its async context (no release). */
  runInLease<T>(lease: Lease, fn: () => T): T;
  releaseQuietly(lease: Lease): Promise<void>;
  /** Throw if `lease`, or a lease this async context is nested in, is known lost. */
  assertHeldAround(lease: Lease): void;
  skipped(lock: ResolvedMethodLock, key: string): void;
}

interface InstanceBinding {
  runner: DecoratedCallRunner;
  /** Whether the application that bound it is still running (a closed one may be replaced). */
  live: () => boolean;
  /** Each declaration's resolved lock: a wrapper finds its own, whatever the property is called. */
  locks: Map<DecoratedMethod, ResolvedMethodLock>;
}

/**
 * Which application's lock engine serves a provider instance, filled at bootstrap. Keyed by
 * instance because one class can live in several applications in one process.
 */
const bindings = new WeakMap<object, InstanceBinding>();

export function bindInstance(
  instance: object,
  runner: DecoratedCallRunner,
  declaration: DecoratedMethod,
  lock: ResolvedMethodLock,
  live: () => boolean,
): void {
  let binding = bindings.get(instance);
  if (!binding) {
    binding = { runner, live, locks: new Map() };
    bindings.set(instance, binding);
  }
  else if (binding.runner !== runner && binding.live()) {
    // One object provided to two applications: its calls would silently use whichever bound last.
    throw new DistributedLockError(
      `@DistributedLock on ${lock.where}: this instance is already served by another application's lock service ` +
        '(the same object provided to two Nest applications); give each application its own instance',
    );
  }
  binding.runner = runner;
  binding.live = live;
  binding.locks.set(declaration, lock);
}

export function bindingOf(instance: unknown): InstanceBinding | undefined {
  return typeof instance === 'object' && instance !== null ? bindings.get(instance) : undefined;
}
