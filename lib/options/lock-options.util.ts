import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { LOCK_PURPOSES, type LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockOptions } from '../interfaces/lock-options.interface.js';
import { checkNonNegativeMs, checkPositiveMs, type ResolvedModuleOptions } from './module-options.util.js';

/** Longest key accepted; longer keys are almost always a bug (a serialized object). */
export const MAX_KEY_LENGTH = 1024;

const LOCK_FIELDS = ['purpose', 'ttl', 'wait', 'signal', 'backend'];

export interface ResolvedLockOptions {
  key: string;
  purpose: LockPurpose;
  ttl: number;
  wait: number;
  signal?: AbortSignal;
  backend: string;
}

export function checkKey(key: unknown, where: string): string {
  if (typeof key !== 'string') {
    throw new InvalidLockOptionsError('key', `must be a string, got ${key === null ? 'null' : typeof key}`, where);
  }
  if (key.length === 0) throw new InvalidLockOptionsError('key', 'must not be empty', where);
  if (key.length > MAX_KEY_LENGTH) {
    throw new InvalidLockOptionsError('key', `must be at most ${MAX_KEY_LENGTH} characters, got ${key.length}`, where);
  }
  return key;
}

export function checkPurpose(purpose: unknown, where: string): LockPurpose {
  if (purpose === undefined) {
    throw new InvalidLockOptionsError(
      'purpose',
      "is required: 'efficiency' (a rare double run is acceptable) or 'correctness' (protects shared state; needs fencing)",
      where,
    );
  }
  if (!LOCK_PURPOSES.includes(purpose as LockPurpose)) {
    throw new InvalidLockOptionsError('purpose', `must be 'efficiency' or 'correctness', got ${JSON.stringify(purpose)}`, where);
  }
  return purpose as LockPurpose;
}

/**
 * The backend a lock with this purpose uses. Refuses — never falls back — when the purpose is
 * `correctness` and the backend issues no fencing tokens.
 */
export function routeBackend(
  purpose: LockPurpose,
  explicit: unknown,
  module: ResolvedModuleOptions,
  where: string,
): string {
  const configured = Object.keys(module.capabilities);
  if (explicit !== undefined && (typeof explicit !== 'string' || !(explicit in module.capabilities))) {
    throw new InvalidLockOptionsError('backend', `unknown backend ${JSON.stringify(explicit)} (configured: ${configured.join(', ')})`, where);
  }
  const name = (explicit as string | undefined) ?? module.purposes[purpose];
  if (name === undefined) {
    throw new InvalidLockOptionsError(
      'purpose',
      `no configured backend can serve '${purpose}' locks: they need fencing tokens, which ${configured.join(', ')} do not issue; configure etcd`,
      where,
    );
  }
  if (purpose === 'correctness' && !module.capabilities[name].fencing) {
    throw new InvalidLockOptionsError(
      'backend',
      `backend "${name}" issues no fencing tokens, so it cannot serve 'correctness' locks`,
      where,
    );
  }
  return name;
}

interface CommonLockSettings {
  purpose: LockPurpose;
  ttl: number;
  wait: number;
  backend: string;
}

/** Fields every kind of lock options shares: refuses unknown fields, fills module defaults, routes. */
export function resolveCommon(
  opts: object | undefined,
  known: readonly string[],
  module: ResolvedModuleOptions,
  where: string,
): CommonLockSettings {
  if (typeof opts !== 'object' || opts === null) {
    throw new InvalidLockOptionsError('options', "must be an object with at least { purpose: 'efficiency' | 'correctness' }", where);
  }
  for (const field of Object.keys(opts)) {
    if (!known.includes(field)) {
      throw new InvalidLockOptionsError(field, `unknown option (known: ${known.join(', ')})`, where);
    }
  }
  const o = opts as Partial<LockOptions>;
  const purpose = checkPurpose(o.purpose, where);
  return {
    purpose,
    ttl: checkPositiveMs(o.ttl ?? module.defaults.ttl, 'ttl', where),
    wait: checkNonNegativeMs(o.wait ?? module.defaults.wait, 'wait', where),
    backend: routeBackend(purpose, o.backend, module, where),
  };
}

/** Validate one acquisition's options before any backend call; every error names the field. */
export function resolveLockOptions(
  key: unknown,
  opts: LockOptions | undefined,
  module: ResolvedModuleOptions,
  where: string,
): ResolvedLockOptions {
  const common = resolveCommon(opts, LOCK_FIELDS, module, where);
  const signal = opts!.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidLockOptionsError('signal', 'must be an AbortSignal', where);
  }
  return { key: checkKey(key, where), ...common, signal };
}
