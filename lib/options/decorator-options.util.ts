import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { DistributedLockOptions, OnBusy } from '../interfaces/distributed-lock-decorator-options.interface.js';
import { checkKey, checkKeys, DECORATOR_FIELDS, resolveCommon, upgradeableKeys, type CommonLockSettings } from './lock-options.util.js';
import type { ResolvedModuleOptions } from './module-options.util.js';

const ON_BUSY: readonly OnBusy[] = ['throw', 'skip', 'wait'];

/** A decorated method's options after bootstrap validation against the module's backends. */
export interface ResolvedMethodLock extends CommonLockSettings {
  /** `Class.method`, for messages. */
  where: string;
  key: string | readonly string[] | ((...args: unknown[]) => string | readonly string[]);
  onBusy: OnBusy;
}

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
  else if (Array.isArray(key)) {
    const keys = checkKeys(key, where);
    if (keys.keys && common.permits > 1) throw new InvalidLockOptionsError('permits', 'a semaphore takes one key; several keys take one lease over all of them', where);
    if (keys.keys && common.mode === 'upgradeable') throw upgradeableKeys(where);
    key = keys.keys ?? keys.key;
  } else if (typeof key !== 'function') {
    throw new InvalidLockOptionsError('key', `must be a string, an array of strings, or a function of the method's arguments, got ${typeof key}`, where);
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

/**
 * The locks one call of a method takes nest in one async context: its stacked declarations, and
 * those of the decorated methods it overrides (reached through `super`). Two of them with one
 * static key on one backend are one lock — the inner one re-enters the outer's lease — so they can
 * never both be held when their purposes differ: the reentry is refused at every call. Refused
 * here instead, at bootstrap, naming the method and the field. Everything else composes: one key
 * for two purposes on two backends is two locks; for one purpose, the inner declaration's lease
 * settings apply to the shared lease as a nested acquisition's do; `onBusy` and `wait` never
 * matter to a reentry; each declaration applies its own `rejectOnLoss`. Key functions cannot be
 * compared before a call (the reentry check names the method then).
 *
 * @param locks outermost first: the override's declarations before those of the method it overrides
 */
export function refuseConflictingLocks(locks: readonly ResolvedMethodLock[]): void {
  for (let i = 0; i < locks.length; i++) {
    const outer = locks[i];
    if (typeof outer.key !== 'string') continue;
    for (let j = i + 1; j < locks.length; j++) {
      const inner = locks[j];
      if (inner.key !== outer.key || inner.backend !== outer.backend) continue;
      if (inner.purpose === outer.purpose) {
        if (inner.permits === outer.permits) continue;
        throw new InvalidLockOptionsError(
          'permits',
          `declares "${outer.key}" with permits ${outer.permits} and again on ${inner.where} with permits ${inner.permits}: ` +
            'every holder of one key must agree on permits',
          `@DistributedLock on ${outer.where}`,
        );
      }
      const second = inner.where === outer.where ? 'a second time on the same method' : `again on ${inner.where}, which it overrides`;
      throw new InvalidLockOptionsError(
        'purpose',
        `declares the lock "${outer.key}" on backend "${outer.backend}" for '${outer.purpose}' and ${second} for '${inner.purpose}': ` +
          'both are taken in one call, and a key this call holds for one purpose cannot be taken again for the other, so every ' +
          'call would fail. Use one purpose per key, or give the declarations different keys',
        `@DistributedLock on ${outer.where}`,
      );
    }
  }
}
