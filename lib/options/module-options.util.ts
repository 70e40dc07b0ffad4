import { BACKEND_PLUGINS } from '../backends/backend-registry.js';
import type { BackendPlugin, ConfiguredBackend } from '../backends/backend-plugin.interface.js';
import type { LockBackend, LockBackendCapabilities } from '../backends/lock-backend.interface.js';
import {
  checkNonNegativeMs,
  checkPositiveMs,
  checkTtl,
  DEFAULT_DRIFT_FACTOR,
  failOption as fail,
  isPlainObject,
  MODULE_OPTIONS,
  rejectUnknown,
} from '../common/checks.util.js';
import { checkCanServe, routeByDefault } from './purpose-routing.util.js';
import { LOCK_PURPOSES, type DistributedLockModuleOptions, type LockPurpose } from '../interfaces/distributed-lock-options.interface.js';


const BUILT_IN_FIELDS = Object.keys(BACKEND_PLUGINS);
const MODULE_FIELDS = [...BUILT_IN_FIELDS, 'backends', 'purposes', 'defaults', 'driftFactor', 'metrics'];
const BACKEND_METHODS = ['acquire', 'waitForTurn', 'extend', 'release', 'close'] as const;

/** Module options after validation, with every default filled in. */
export interface ResolvedModuleOptions {
  /** Built-in backends to build, in registry order. */
  builtIn: ConfiguredBackend[];
  /** The application's own backends (never closed by the module). */
  backends: Record<string, LockBackend>;
  /** Backend name per purpose; absent when no configured backend can serve it. */
  purposes: Partial<Record<LockPurpose, string>>;
  /** Capabilities of every configured backend, by name. */
  capabilities: Record<string, LockBackendCapabilities>;
  defaults: { ttl: number; wait: number; watchdog: boolean; maxHold?: number; lockDelay: number };
  driftFactor: number;
  metrics: { enabled: boolean; includeKey: boolean };
}

function checkBackend(name: string, backend: unknown): LockBackend {
  const field = `backends.${name}`;
  if (!isPlainObject(backend) && typeof backend !== 'object') fail(field, 'must be a LockBackend instance');
  const b = backend as Record<string, unknown>;
  for (const method of BACKEND_METHODS) {
    if (typeof b?.[method] !== 'function') fail(field, `must implement LockBackend (no ${method}())`);
  }
  const caps = b.capabilities as Record<string, unknown> | undefined;
  if (!isPlainObject(caps) || typeof caps.fencing !== 'boolean') {
    fail(`${field}.capabilities`, 'must declare { fencing, fairQueue, distributed } booleans');
  }
  return backend as LockBackend;
}

/** Each registered plugin whose field is set resolves it; the module knows none of their fields. */
function resolveBuiltIn(raw: Record<string, unknown>): ConfiguredBackend[] {
  const configured: ConfiguredBackend[] = [];
  for (const [field, plugin] of Object.entries(BACKEND_PLUGINS) as [string, BackendPlugin<unknown, unknown>][]) {
    if (raw[field] === undefined) continue;
    const settings = plugin.resolve(raw[field], field);
    if (settings === undefined) continue;
    configured.push({ field, name: plugin.chosenName?.(settings, field).name ?? field, plugin, settings });
  }
  return configured;
}

/**
 * Every backend's name and capabilities. Built-in backends named after their field come first,
 * then the application's (which may not take those names), then built-in backends the user names
 * (`memory: { name }`), whose clash with any other name is reported on the option that named them.
 */
function registerBackends(raw: Record<string, any>, builtIn: ConfiguredBackend[]): {
  backends: Record<string, LockBackend>;
  capabilities: Record<string, LockBackendCapabilities>;
} {
  const capabilities: Record<string, LockBackendCapabilities> = {};
  const named = builtIn.filter((b) => b.plugin.chosenName !== undefined);
  for (const b of builtIn) if (!named.includes(b)) capabilities[b.name] = b.plugin.capabilities;
  const backends: Record<string, LockBackend> = {};
  if (raw.backends !== undefined) {
    if (!isPlainObject(raw.backends)) fail('backends', 'must be an object of name → LockBackend');
    for (const [name, backend] of Object.entries(raw.backends)) {
      if (name in capabilities) fail(`backends.${name}`, `the name "${name}" is already taken by a built-in backend`);
      backends[name] = checkBackend(name, backend);
      capabilities[name] = backends[name].capabilities;
    }
  }
  for (const b of named) {
    if (b.name in capabilities) fail(b.plugin.chosenName!(b.settings, b.field).field, `the name "${b.name}" is already taken`);
    capabilities[b.name] = b.plugin.capabilities;
  }
  return { backends, capabilities };
}

/**
 * Validate module options once, at bootstrap, and fill in defaults. Every error names the field.
 */
export function resolveModuleOptions(input: DistributedLockModuleOptions | undefined): ResolvedModuleOptions {
  if (!isPlainObject(input)) fail('options', 'must be an object such as { redis: { url } }');
  const raw = input as Record<string, any>;
  rejectUnknown(raw, MODULE_FIELDS, '');

  const builtIn = resolveBuiltIn(raw);
  const { backends, capabilities } = registerBackends(raw, builtIn);
  const names = Object.keys(capabilities);
  if (names.length === 0) fail('options', `configure at least one backend: ${BUILT_IN_FIELDS.join(', ')} or backends`);

  const routed: Partial<Record<LockPurpose, string>> = {};
  if (raw.purposes !== undefined) {
    if (!isPlainObject(raw.purposes)) fail('purposes', 'must be an object of purpose → backend name');
    rejectUnknown(raw.purposes, [...LOCK_PURPOSES], 'purposes.');
    for (const purpose of LOCK_PURPOSES) {
      const name = raw.purposes[purpose];
      if (name === undefined) continue;
      if (typeof name !== 'string' || !(name in capabilities)) {
        fail(`purposes.${purpose}`, `unknown backend ${JSON.stringify(name)} (configured: ${names.join(', ')})`);
      }
      checkCanServe(purpose, name, capabilities, `purposes.${purpose}`, MODULE_OPTIONS);
      routed[purpose] = name;
    }
  }
  const purposes = routeByDefault(routed, capabilities);

  const driftFactor = raw.driftFactor ?? DEFAULT_DRIFT_FACTOR;
  if (typeof driftFactor !== 'number' || !(driftFactor >= 0 && driftFactor < 0.5)) {
    fail('driftFactor', `must be a number in [0, 0.5), got ${String(driftFactor)}`);
  }

  const defaults = raw.defaults ?? {};
  if (!isPlainObject(defaults)) fail('defaults', 'must be an object { ttl?, wait?, watchdog?, maxHold?, lockDelay? }');
  rejectUnknown(defaults, ['ttl', 'wait', 'watchdog', 'maxHold', 'lockDelay'], 'defaults.');
  if (defaults.watchdog !== undefined && typeof defaults.watchdog !== 'boolean') fail('defaults.watchdog', 'must be a boolean');

  const metrics = raw.metrics ?? true;
  if (typeof metrics !== 'boolean' && !isPlainObject(metrics)) fail('metrics', 'must be a boolean or { includeKey? }');
  if (isPlainObject(metrics)) {
    rejectUnknown(metrics, ['includeKey'], 'metrics.');
    if (metrics.includeKey !== undefined && typeof metrics.includeKey !== 'boolean') fail('metrics.includeKey', 'must be a boolean');
  }

  return {
    builtIn,
    backends,
    purposes,
    capabilities,
    defaults: {
      ttl: checkTtl(defaults.ttl ?? 30_000, 'defaults.ttl', driftFactor, MODULE_OPTIONS),
      wait: checkNonNegativeMs(defaults.wait ?? 10_000, 'defaults.wait', MODULE_OPTIONS),
      watchdog: (defaults.watchdog as boolean | undefined) ?? false,
      maxHold: defaults.maxHold === undefined ? undefined : checkPositiveMs(defaults.maxHold, 'defaults.maxHold', MODULE_OPTIONS),
      lockDelay: checkNonNegativeMs(defaults.lockDelay ?? 0, 'defaults.lockDelay', MODULE_OPTIONS),
    },
    driftFactor,
    metrics: { enabled: metrics !== false, includeKey: isPlainObject(metrics) && metrics.includeKey === true },
  };
}
