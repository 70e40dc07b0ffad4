import { checkPositiveMs, checkPrefix, failOption, isPlainObject, MODULE_OPTIONS, rejectUnknown } from '../../common/checks.util.js';
import { describeValue } from '../../common/redact.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';
import type { EtcdClientLike } from './etcd-client.interface.js';

/** The revision at which a lock became ours is its fencing token. */
export const ETCD_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: true, semaphore: true };

/** The defaults of `forRoot({ etcd })` and of `new EtcdBackend()` alike. */
export const ETCD_DEFAULTS = { prefix: 'lock/', sessionTtlSeconds: 10, commandTimeoutMs: 2000 } as const;

/** The etcd backend (serves `correctness` locks: its revision is the fencing token). */
export interface EtcdBackendOptions {
  /**
   * Endpoint(s); the module opens this client and closes it on shutdown.
   * @example '127.0.0.1:2379' or ['10.0.0.1:2379', '10.0.0.2:2379', '10.0.0.3:2379']
   */
  hosts?: string | string[];
  /** More etcd3 client options (auth, credentials for TLS, grpcOptions, dialTimeout, …). */
  options?: Record<string, unknown>;
  /** An `Etcd3` client the application already owns. Never closed by this module. */
  client?: EtcdClientLike;
  /** Prefix of every key this backend writes. @default 'lock/' */
  prefix?: string;
  /**
   * TTL of the session lease all lock keys ride on, in whole seconds. A crashed or paused
   * holder's key disappears at most this long after its last keep-alive. @default 10
   */
  sessionTtlSeconds?: number;
  /** How long one request may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** What `new EtcdBackend()` takes (the module builds one from `EtcdBackendOptions`). */
export interface EtcdBackendConfig {
  /** An `Etcd3` client. */
  client: EtcdClientLike;
  /** Close the client in `close()` (true only when the module created it). */
  ownsClient: boolean;
  /** Prefix of every key this backend writes. @default 'lock/' */
  prefix?: string;
  /** TTL of the shared session lease, in seconds (whole, ≥ 1). @default 10 */
  sessionTtlSeconds?: number;
  /** @default 2000 */
  commandTimeoutMs?: number;
  /** @default 0.01 */
  driftFactor?: number;
  name?: string;
}

/** `EtcdBackendOptions` after `resolveEtcdOptions()`: defaults filled in, hosts as a list. */
export type ResolvedEtcdOptions = Pick<EtcdBackendOptions, 'options' | 'client'> &
  Required<Pick<EtcdBackendOptions, 'prefix' | 'sessionTtlSeconds' | 'commandTimeoutMs'>> & { hosts?: string[] };

/** The fields `etcd` accepts, in the order errors list them; `satisfies` keeps it in step with the type. */
const FIELDS = Object.keys({ hosts: 1, options: 1, client: 1, prefix: 1, sessionTtlSeconds: 1, commandTimeoutMs: 1 } satisfies Record<keyof EtcdBackendOptions, 1>);

/** `forRoot({ etcd })` checked, with defaults. */
export function resolveEtcdOptions(raw: unknown, field: string): ResolvedEtcdOptions {
  if (!isPlainObject(raw)) failOption(field, "must be an object such as { hosts: '127.0.0.1:2379' }");
  rejectUnknown(raw, FIELDS, `${field}.`);
  const { hosts, options, client } = raw;
  if (client !== undefined) {
    const c = client as Record<string, unknown>;
    for (const method of ['lease', 'watch', 'close'] as const) {
      if (typeof c?.[method] !== 'function') failOption(`${field}.client`, `must be an etcd3 Etcd3 instance (no ${method}())`);
    }
    if (typeof (c.kv as Record<string, unknown> | undefined)?.txn !== 'function') failOption(`${field}.client`, 'must be an etcd3 Etcd3 instance (no kv.txn())');
    if (hosts !== undefined || options !== undefined) failOption(`${field}.client`, 'give either client or hosts/options, not both');
  } else if (hosts === undefined) {
    failOption(`${field}.hosts`, "is required (or pass client): for example '127.0.0.1:2379'");
  }
  let list: string[] | undefined;
  if (hosts !== undefined) {
    list = typeof hosts === 'string' ? [hosts] : (hosts as string[]);
    if (!Array.isArray(list) || list.length === 0 || !list.every((h) => typeof h === 'string' && h.length > 0)) {
      failOption(`${field}.hosts`, `must be a non-empty string or array of strings, got ${describeValue(hosts)}`);
    }
  }
  if (options !== undefined && !isPlainObject(options)) failOption(`${field}.options`, 'must be an object of etcd3 client options');
  const sessionTtlSeconds = raw.sessionTtlSeconds ?? ETCD_DEFAULTS.sessionTtlSeconds;
  if (typeof sessionTtlSeconds !== 'number' || !Number.isInteger(sessionTtlSeconds) || sessionTtlSeconds < 1) {
    failOption(`${field}.sessionTtlSeconds`, `must be a whole number of seconds ≥ 1 (etcd leases are whole seconds), got ${String(sessionTtlSeconds)}`);
  }
  return {
    hosts: list,
    options: options as Record<string, unknown> | undefined,
    client: client as EtcdClientLike | undefined,
    prefix: checkPrefix(raw.prefix ?? ETCD_DEFAULTS.prefix, `${field}.prefix`),
    sessionTtlSeconds,
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? ETCD_DEFAULTS.commandTimeoutMs, `${field}.commandTimeoutMs`, MODULE_OPTIONS),
  };
}
