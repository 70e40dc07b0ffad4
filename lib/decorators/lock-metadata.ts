import type { DistributedLockOptions } from '../interfaces/distributed-lock-decorator-options.interface.js';

/**
 * Metadata key under which `@DistributedLock` records its declarations on the method: a list,
 * innermost first, so stacked declarations (and wrappers that copy metadata) keep every one.
 */
export const DISTRIBUTED_LOCK_METADATA = Symbol('nest-distributed-lock:declarations');

/** What one `@DistributedLock` recorded: the raw options and where they sit. Its identity names the declaration. */
export interface DecoratedMethod {
  options: DistributedLockOptions;
  className: string;
  methodName: string;
}

/** The declarations recorded on a method (empty when it has none). */
export function declarationsOf(method: unknown): readonly DecoratedMethod[] {
  if (typeof method !== 'function') return [];
  return (Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, method) as DecoratedMethod[] | undefined) ?? [];
}
