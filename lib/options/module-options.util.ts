import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import {
  LOCK_PURPOSES,
  type DistributedLockModuleOptions,
  type LockPurpose,
  type EtcdBackendOptions,
  type RedisBackendOptions,
} from '../interfaces/distributed-lock-options.interface.js';
import type { LockBackend, LockBackendCapabilities } from '../backends/lock-backend.interface.js';
import {
  checkNonNegativeMs,
  checkPositiveMs,
  checkTtl,
  isPlainObject,
  isWellFormed,
  MODULE_OPTIONS,
  rejectUnknown as rejectUnknownIn,
} from '../common/checks.util.js';
import { describeValue } from '../common/redact.util.js';

// engine/lease.ts still imports checkTtl from here; its owner moves that import to common/ (issue 14).
export { checkTtl } from '../common/checks.util.js';

const WHERE = MODULE_OPTIONS;
const MODULE_FIELDS = ['redis', 'etcd', 'memory', 'backends', 'purposes', 'defaults', 'driftFactor', 'metrics'];
const REDIS_FIELDS = ['url', 'options', 'client', 'keyPrefix', 'connectTimeoutMs', 'commandTimeoutMs'];
const ETCD_FIELDS = ['hosts', 'options', 'client', 'prefix', 'sessionTtlSeconds', 'commandTimeoutMs'];
const BACKEND_METHODS = ['acquire', 'waitForTurn', 'extend', 'release', 'close'] as const;

export const REDIS_CAPABILITIES: LockBackendCapabilities = { fencing: false, fairQueue: true, distributed: true };
export const ETCD_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: true };
export const MEMORY_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: false };

export interface ResolvedRedisOptions {
  url?: string;
  options?: Record<string, unknown>;
  client?: RedisBackendOptions['client'];
  keyPrefix: string;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
}

export interface ResolvedEtcdOptions {
  hosts?: string[];
  options?: Record<string, unknown>;
  client?: EtcdBackendOptions['client'];
  prefix: string;
  sessionTtlSeconds: number;
  commandTimeoutMs: number;
}

/** Module options after validation, with every default filled in. */
export interface ResolvedModuleOptions {
  redis?: ResolvedRedisOptions;
  etcd?: ResolvedEtcdOptions;
  memory?: { name: string };
  backends: Record<string, LockBackend>;
  /** Backend name per purpose; absent when no configured backend can serve it. */
  purposes: Partial<Record<LockPurpose, string>>;
  /** Capabilities of every configured backend, by name. */
  capabilities: Record<string, LockBackendCapabilities>;
  defaults: { ttl: number; wait: number; watchdog: boolean; maxHold?: number; lockDelay: number };
  driftFactor: number;
  metrics: { enabled: boolean; includeKey: boolean };
}

function fail(field: string, problem: string): never {
  throw new InvalidLockOptionsError(field, problem, WHERE);
}

const rejectUnknown = (obj: Record<string, unknown>, known: string[], path: string): void => rejectUnknownIn(obj, known, path);

/**
 * The part of a Redis key that Cluster hashes: between the first `{` and the first `}` after it,
 * if that is not empty; otherwise the whole key (`undefined` here).
 */
export function redisHashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * A key prefix whose first `{` is followed at once by `}` gives every key an empty hash tag, so
 * the keys of one lock would land in different Cluster slots (CROSSSLOT) whatever the lock key.
 */
export function checkRedisKeyPrefix(prefix: unknown, cluster: boolean, where: string, field = 'redis.keyPrefix'): string {
  if (typeof prefix !== 'string') throw new InvalidLockOptionsError(field, 'must be a string', where);
  if (!isWellFormed(prefix)) {
    throw new InvalidLockOptionsError(field, 'must not contain a lone UTF-16 surrogate (it has no UTF-8 encoding)', where);
  }
  const open = prefix.indexOf('{');
  if (cluster && open >= 0 && prefix[open + 1] === '}') {
    throw new InvalidLockOptionsError(
      field,
      `its first "{" is followed by "}" (an empty hash tag), so on Redis Cluster a lock's keys would hash to different slots`,
      where,
    );
  }
  return prefix;
}

/**
 * A redis:// or rediss:// URL, scheme in any case. Returned with the scheme in lower case: ioredis
 * turns TLS on only for a literal `rediss://`, so `REDISS://` would otherwise connect in clear.
 * Errors never echo the credentials the URL may carry.
 */
function checkRedisUrl(url: unknown): string {
  const scheme = typeof url === 'string' ? /^(rediss?):\/\/(?=.)/i.exec(url) : null;
  if (typeof url !== 'string' || !scheme) {
    return fail('redis.url', `must be a redis:// or rediss:// URL, got ${describeValue(url)}`);
  }
  const normalized = scheme[1].toLowerCase() + url.slice(scheme[1].length);
  try {
    new URL(normalized); // ioredis parses it so; its TypeError would carry the whole URL as `input`
  } catch {
    fail('redis.url', `is not a valid URL: ${describeValue(url)}`);
  }
  return normalized;
}

function resolveRedis(raw: unknown): ResolvedRedisOptions {
  if (!isPlainObject(raw)) return fail('redis', 'must be an object such as { url: "redis://127.0.0.1:6379" }');
  rejectUnknown(raw, REDIS_FIELDS, 'redis.');
  const { url, options, client } = raw;
  if (client !== undefined) {
    const c = client as Record<string, unknown>;
    if (!isPlainObject(c) && typeof c !== 'object') fail('redis.client', 'must be an ioredis Redis or Cluster instance');
    for (const method of ['set', 'evalsha', 'eval', 'duplicate'] as const) {
      if (typeof c?.[method] !== 'function') fail('redis.client', `must be an ioredis Redis or Cluster instance (no ${method}())`);
    }
    if (url !== undefined || options !== undefined) fail('redis.client', 'give either client or url/options, not both');
  } else if (url === undefined && options === undefined) {
    fail('redis', 'needs url, options or client');
  }
  if (options !== undefined && !isPlainObject(options)) fail('redis.options', 'must be an object of ioredis options');
  const cluster = (client as { isCluster?: unknown } | undefined)?.isCluster === true;
  const keyPrefix = checkRedisKeyPrefix(raw.keyPrefix ?? 'lock:', cluster, WHERE);
  return {
    url: url === undefined ? undefined : checkRedisUrl(url),
    options: options as Record<string, unknown> | undefined,
    client: client as ResolvedRedisOptions['client'],
    keyPrefix: keyPrefix as string,
    connectTimeoutMs: checkPositiveMs(raw.connectTimeoutMs ?? 2000, 'redis.connectTimeoutMs', WHERE),
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? 2000, 'redis.commandTimeoutMs', WHERE),
  };
}

function resolveEtcd(raw: unknown): ResolvedEtcdOptions {
  if (!isPlainObject(raw)) fail('etcd', "must be an object such as { hosts: '127.0.0.1:2379' }");
  rejectUnknown(raw, ETCD_FIELDS, 'etcd.');
  const { hosts, options, client } = raw;
  if (client !== undefined) {
    const c = client as Record<string, unknown>;
    for (const method of ['lease', 'watch', 'close'] as const) {
      if (typeof c?.[method] !== 'function') fail('etcd.client', `must be an etcd3 Etcd3 instance (no ${method}())`);
    }
    if (typeof (c.kv as Record<string, unknown> | undefined)?.txn !== 'function') fail('etcd.client', 'must be an etcd3 Etcd3 instance (no kv.txn())');
    if (hosts !== undefined || options !== undefined) fail('etcd.client', 'give either client or hosts/options, not both');
  } else if (hosts === undefined) {
    fail('etcd.hosts', "is required (or pass client): for example '127.0.0.1:2379'");
  }
  let list: string[] | undefined;
  if (hosts !== undefined) {
    list = typeof hosts === 'string' ? [hosts] : (hosts as string[]);
    if (!Array.isArray(list) || list.length === 0 || !list.every((h) => typeof h === 'string' && h.length > 0)) {
      fail('etcd.hosts', `must be a non-empty string or array of strings, got ${describeValue(hosts)}`);
    }
  }
  if (options !== undefined && !isPlainObject(options)) fail('etcd.options', 'must be an object of etcd3 client options');
  const prefix = raw.prefix ?? 'lock/';
  if (typeof prefix !== 'string') fail('etcd.prefix', 'must be a string');
  if (!isWellFormed(prefix)) fail('etcd.prefix', 'must not contain a lone UTF-16 surrogate (it has no UTF-8 encoding)');
  const sessionTtlSeconds = raw.sessionTtlSeconds ?? 10;
  if (typeof sessionTtlSeconds !== 'number' || !Number.isInteger(sessionTtlSeconds) || sessionTtlSeconds < 1) {
    fail('etcd.sessionTtlSeconds', `must be a whole number of seconds ≥ 1 (etcd leases are whole seconds), got ${String(sessionTtlSeconds)}`);
  }
  return {
    hosts: list,
    options: options as Record<string, unknown> | undefined,
    client: client as ResolvedEtcdOptions['client'],
    prefix: prefix as string,
    sessionTtlSeconds: sessionTtlSeconds as number,
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? 2000, 'etcd.commandTimeoutMs', WHERE),
  };
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

/**
 * Validate module options once, at bootstrap, and fill in defaults. Every error names the field.
 */
export function resolveModuleOptions(input: DistributedLockModuleOptions | undefined): ResolvedModuleOptions {
  if (!isPlainObject(input)) fail('options', 'must be an object such as { redis: { url } }');
  const raw = input as Record<string, any>;
  rejectUnknown(raw, MODULE_FIELDS, '');

  const capabilities: Record<string, LockBackendCapabilities> = {};
  const redis = raw.redis === undefined ? undefined : resolveRedis(raw.redis);
  if (redis) capabilities.redis = REDIS_CAPABILITIES;
  const etcd = raw.etcd === undefined ? undefined : resolveEtcd(raw.etcd);
  if (etcd) capabilities.etcd = ETCD_CAPABILITIES;

  let memory: { name: string } | undefined;
  if (raw.memory !== undefined && raw.memory !== false) {
    if (raw.memory !== true && !isPlainObject(raw.memory)) fail('memory', 'must be true or { name? }');
    const name = raw.memory === true ? 'memory' : (raw.memory.name ?? 'memory');
    if (typeof name !== 'string' || name === '') fail('memory.name', 'must be a non-empty string');
    memory = { name };
  }

  const backends: Record<string, LockBackend> = {};
  if (raw.backends !== undefined) {
    if (!isPlainObject(raw.backends)) fail('backends', 'must be an object of name → LockBackend');
    for (const [name, backend] of Object.entries(raw.backends)) {
      if (name in capabilities) fail(`backends.${name}`, `the name "${name}" is already taken by a built-in backend`);
      backends[name] = checkBackend(name, backend);
      capabilities[name] = backends[name].capabilities;
    }
  }
  if (memory) {
    if (memory.name in capabilities) fail('memory.name', `the name "${memory.name}" is already taken`);
    capabilities[memory.name] = MEMORY_CAPABILITIES;
  }

  const names = Object.keys(capabilities);
  if (names.length === 0) fail('options', 'configure at least one backend: redis, etcd, memory or backends');

  const purposes: Partial<Record<LockPurpose, string>> = {};
  if (raw.purposes !== undefined) {
    if (!isPlainObject(raw.purposes)) fail('purposes', 'must be an object of purpose → backend name');
    rejectUnknown(raw.purposes, [...LOCK_PURPOSES], 'purposes.');
    for (const purpose of LOCK_PURPOSES) {
      const name = raw.purposes[purpose];
      if (name === undefined) continue;
      if (typeof name !== 'string' || !(name in capabilities)) {
        fail(`purposes.${purpose}`, `unknown backend ${JSON.stringify(name)} (configured: ${names.join(', ')})`);
      }
      if (purpose === 'correctness' && !capabilities[name].fencing) {
        fail('purposes.correctness', `backend "${name}" issues no fencing tokens, so it cannot serve correctness locks`);
      }
      purposes[purpose] = name;
    }
  }
  purposes.efficiency ??= redis ? 'redis' : (names.find((n) => capabilities[n].distributed) ?? names[0]);
  // Correctness goes by default only to a backend that is both fencing and distributed: the
  // in-memory one would let every replica "hold" the same key (each with token 1). A test setup
  // that wants it says so: purposes: { correctness: 'memory' }.
  purposes.correctness ??= ['etcd', ...names].find((n) => capabilities[n]?.fencing && capabilities[n].distributed);
  if (purposes.correctness === undefined) delete purposes.correctness;

  const driftFactor = raw.driftFactor ?? 0.01;
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
    redis,
    etcd,
    memory,
    backends,
    purposes,
    capabilities,
    defaults: {
      ttl: checkTtl(defaults.ttl ?? 30_000, 'defaults.ttl', driftFactor, WHERE),
      wait: checkNonNegativeMs(defaults.wait ?? 10_000, 'defaults.wait', WHERE),
      watchdog: (defaults.watchdog as boolean | undefined) ?? false,
      maxHold: defaults.maxHold === undefined ? undefined : checkPositiveMs(defaults.maxHold, 'defaults.maxHold', WHERE),
      lockDelay: checkNonNegativeMs(defaults.lockDelay ?? 0, 'defaults.lockDelay', WHERE),
    },
    driftFactor,
    metrics: { enabled: metrics !== false, includeKey: isPlainObject(metrics) && metrics.includeKey === true },
  };
}
