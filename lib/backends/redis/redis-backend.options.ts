import { checkPositiveMs, failOption, isPlainObject, MODULE_OPTIONS, rejectUnknown } from '../../common/checks.util.js';
import { describeValue } from '../../common/redact.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { checkRedisClient, type RedisClientInput } from './redis-client.check.js';
import { checkRedisKeyPrefix } from './redis-keys.util.js';

/** No fencing tokens: a failover or a restart without persistence can lose a key. */
export const REDIS_CAPABILITIES: LockBackendCapabilities = { fencing: false, fairQueue: true, distributed: true, semaphore: true };

/** The defaults of `forRoot({ redis })` and of `new RedisBackend()` alike. */
export const REDIS_DEFAULTS = { keyPrefix: 'lock:', connectTimeoutMs: 2000, commandTimeoutMs: 2000, waiterHeartbeatMs: 500 } as const;

/** The Redis backend (serves `efficiency` locks; it has no fencing tokens). */
export interface RedisBackendOptions {
  /**
   * Connection URL; the module opens this client and closes it on shutdown.
   * @example 'redis://127.0.0.1:6379/0'
   */
  url?: string;
  /**
   * ioredis options (host, port, password, tls, sentinels + name, …). With `url`, they are
   * merged over it. The module opens and closes this client.
   */
  options?: Record<string, unknown>;
  /**
   * A client the application already owns: an ioredis or iovalkey `Redis` (standalone or Sentinel)
   * or `Cluster`, or a connected node-redis client (`createClient`, `createCluster`,
   * `createSentinel`). Never closed by this module. Mutually exclusive with `url` / `options`.
   */
  client?: RedisClientInput;
  /** Prefix of every key this backend writes. @default 'lock:' */
  keyPrefix?: string;
  /**
   * How long an operation waits for a connection before failing with
   * `LockBackendUnavailableError`. @default 2000
   */
  connectTimeoutMs?: number;
  /** How long one command may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** What `new RedisBackend()` takes (the module builds one from `RedisBackendOptions`). */
export interface RedisBackendConfig {
  /** ioredis or iovalkey `Redis` or `Cluster`, or a connected node-redis client. */
  client: RedisClientInput;
  /** Close the client in `close()` (true only when the module created it). */
  ownsClient: boolean;
  /** @default 'lock:' */
  keyPrefix?: string;
  /** @default 2000 */
  connectTimeoutMs?: number;
  /** @default 2000 */
  commandTimeoutMs?: number;
  /**
   * A waiter re-checks at least this often even without a wake-up: it refreshes its queue entry
   * and covers a lost pub/sub message. Entries and the hand-off reservations this process makes
   * last 3× this. Processes may differ: a woken waiter trusts the reservation for the length the
   * releasing process set (the wake-up message carries it), never for its own. @default 500
   */
  waiterHeartbeatMs?: number;
  name?: string;
  /** Where connection outages of the clients this backend owns are reported (once per outage). */
  log?: { warn(message: string): void; log(message: string): void };
  /**
   * false: callers never queue here (`acquire` with `queue: false` only, as a Redlock master is
   * used): a release is a plain owner-checked delete, with no queue to hand the key on to. @default true
   */
  queueing?: boolean;
}

/** `RedisBackendOptions` after `resolveRedisOptions()`: defaults filled in. */
export type ResolvedRedisOptions = Pick<RedisBackendOptions, 'url' | 'options'> & { client?: RedisClientLike } &
  Required<Pick<RedisBackendOptions, 'keyPrefix' | 'connectTimeoutMs' | 'commandTimeoutMs'>>;

/** The fields `redis` accepts, in the order errors list them; `satisfies` keeps it in step with the type. */
const FIELDS = Object.keys({ url: 1, options: 1, client: 1, keyPrefix: 1, connectTimeoutMs: 1, commandTimeoutMs: 1 } satisfies Record<keyof RedisBackendOptions, 1>);

/**
 * A redis:// or rediss:// URL, scheme in any case. Returned with the scheme in lower case: ioredis
 * turns TLS on only for a literal `rediss://`, so `REDISS://` would otherwise connect in clear.
 * Errors never echo the credentials the URL may carry.
 */
export function checkRedisUrl(url: unknown, field: string): string {
  const scheme = typeof url === 'string' ? /^(rediss?):\/\/(?=.)/i.exec(url) : null;
  if (typeof url !== 'string' || !scheme) {
    return failOption(field, `must be a redis:// or rediss:// URL, got ${describeValue(url)}`);
  }
  const normalized = scheme[1].toLowerCase() + url.slice(scheme[1].length);
  try {
    new URL(normalized); // ioredis parses it so; its TypeError would carry the whole URL as `input`
  } catch {
    failOption(field, `is not a valid URL: ${describeValue(url)}`);
  }
  return normalized;
}

/** `forRoot({ redis })` checked, with defaults. */
export function resolveRedisOptions(raw: unknown, field: string): ResolvedRedisOptions {
  if (!isPlainObject(raw)) return failOption(field, 'must be an object such as { url: "redis://127.0.0.1:6379" }');
  rejectUnknown(raw, FIELDS, `${field}.`);
  const { url, options, client } = raw;
  let checked: RedisClientLike | undefined;
  if (client !== undefined) {
    checked = checkRedisClient(client, `${field}.client`);
    if (url !== undefined || options !== undefined) failOption(`${field}.client`, 'give either client or url/options, not both');
  } else if (url === undefined && options === undefined) {
    failOption(field, 'needs url, options or client');
  }
  if (options !== undefined && !isPlainObject(options)) failOption(`${field}.options`, 'must be an object of ioredis options');
  const cluster = checked?.isCluster === true;
  return {
    url: url === undefined ? undefined : checkRedisUrl(url, `${field}.url`),
    options: options as Record<string, unknown> | undefined,
    client: checked,
    keyPrefix: checkRedisKeyPrefix(raw.keyPrefix ?? REDIS_DEFAULTS.keyPrefix, cluster, MODULE_OPTIONS, `${field}.keyPrefix`),
    connectTimeoutMs: checkPositiveMs(raw.connectTimeoutMs ?? REDIS_DEFAULTS.connectTimeoutMs, `${field}.connectTimeoutMs`, MODULE_OPTIONS),
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? REDIS_DEFAULTS.commandTimeoutMs, `${field}.commandTimeoutMs`, MODULE_OPTIONS),
  };
}
