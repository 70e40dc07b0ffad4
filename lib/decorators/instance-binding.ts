import type { LockEngine } from '../engine/lock-engine.js';
import { DistributedLockError } from '../errors/distributed-lock.error.js';
import type { ResolvedMethodLock } from '../options/decorator-options.util.js';
import type { DecoratedMethod } from './lock-metadata.js';

/** Which engine serves an instance's decorated methods, and each declaration's resolved lock. */
export interface InstanceBinding {
  engine: LockEngine;
  /** Each declaration's resolved lock: a wrapper finds its own, whatever the property is called. */
  locks: Map<DecoratedMethod, ResolvedMethodLock>;
}

/**
 * Which application's lock engine serves a provider instance, filled at bootstrap. Keyed by
 * instance because one class can live in several applications in one process.
 */
const bindings = new WeakMap<object, InstanceBinding>();

export function bindInstance(instance: object, engine: LockEngine, declaration: DecoratedMethod, lock: ResolvedMethodLock): void {
  let binding = bindings.get(instance);
  if (!binding) {
    binding = { engine, locks: new Map() };
    bindings.set(instance, binding);
  } else if (binding.engine !== engine && !binding.engine.isShuttingDown) {
    // One object provided to two applications: its calls would silently use whichever bound last.
    // (One whose application has closed may be bound again.)
    throw new DistributedLockError(
      `@DistributedLock on ${lock.where}: this instance is already served by another application's lock service ` +
        '(the same object provided to two Nest applications); give each application its own instance',
    );
  }
  binding.engine = engine;
  binding.locks.set(declaration, lock);
}

export function bindingOf(instance: unknown): InstanceBinding | undefined {
  return typeof instance === 'object' && instance !== null ? bindings.get(instance) : undefined;
}
