import type { ResolvedMethodLock } from '../decorators/decorated-method.registry.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { DistributedLockOptions, OnBusy } from '../interfaces/distributed-lock-decorator-options.interface.js';
import { checkKey, DECORATOR_FIELDS, resolveCommon } from './lock-options.util.js';
import type { ResolvedModuleOptions } from './module-options.util.js';

const ON_BUSY: readonly OnBusy[] = ['throw', 'skip', 'wait'];

/** How a method is invoked, which decides what a user expects when its lock is busy. */
export type MethodKind = 'http' | 'scheduled' | 'event' | 'provider';

/**
 * Validate a decorated method's options at bootstrap, against the configured backends. Errors
 * name the class, the method and the field.
 */
export function resolveMethodLock(
  options: DistributedLockOptions | undefined,
  className: string,
  methodName: string,
  kind: MethodKind,
  module: ResolvedModuleOptions,
): ResolvedMethodLock {
  const where = `@DistributedLock on ${className}.${methodName}`;
  const common = resolveCommon(options, DECORATOR_FIELDS, module, where);
  const o = options!;
  let key = o.key as ResolvedMethodLock['key'] | undefined;
  if (key === undefined) key = `${className}.${methodName}`;
  else if (typeof key === 'string') checkKey(key, where);
  else if (typeof key !== 'function') {
    throw new InvalidLockOptionsError('key', `must be a string or a function of the method's arguments, got ${typeof key}`, where);
  }
  if (o.onBusy !== undefined && !ON_BUSY.includes(o.onBusy)) {
    throw new InvalidLockOptionsError('onBusy', `must be 'throw', 'skip' or 'wait', got ${JSON.stringify(o.onBusy)}`, where);
  }
  if (o.wait !== undefined && o.onBusy !== undefined && o.onBusy !== 'wait') {
    throw new InvalidLockOptionsError('wait', `waiting contradicts onBusy: '${o.onBusy}'; use onBusy: 'wait' or drop wait`, where);
  }
  const onBusy: OnBusy =
    o.onBusy ?? (o.wait !== undefined ? 'wait' : kind === 'scheduled' || kind === 'event' ? 'skip' : 'throw');
  return { where: `${className}.${methodName}`, key, onBusy, ...common };
}
