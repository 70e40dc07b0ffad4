import { checkPositiveMs, failOption, isPlainObject, MODULE_OPTIONS, rejectUnknown } from '../../common/checks.util.js';
import { describeValue } from '../../common/redact.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';
import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';

/** Tokens from ZooKeeper's zxids (strictly increasing per key, across restarts): `correctness` may use it. Semaphores: zookeeper-semaphore.ts. */
export const ZOOKEEPER_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: true, semaphore: true };

/** The defaults of `forRoot({ zookeeper })` and of `new ZooKeeperBackend()` alike. */
export const ZOOKEEPER_DEFAULTS = {
  prefix: '/nest-distributed-lock',
  sessionTimeoutMs: 10_000,
  connectTimeoutMs: 5_000,
  commandTimeoutMs: 2_000,
} as const;

/** The ZooKeeper backend (serves both purposes: its zxid tokens are monotonic). */
export interface ZooKeeperBackendOptions {
  /**
   * The ensemble, `host:port[,host:port…][/chroot]`; the module opens a `node-zookeeper-client`
   * client and closes it (and its session) on shutdown.
   * @example '127.0.0.1:2181' or 'zk1:2181,zk2:2181,zk3:2181'
   */
  connectionString?: string;
  /** A connected `node-zookeeper-client` client the application owns. Never closed by this module. */
  client?: ZooKeeperClientLike;
  /**
   * The session timeout to ask for, in ms. The server clamps it to 2–20 of its ticks; the lease
   * never trusts more than the timeout the server granted. A paused or cut-off holder's znodes go
   * at most this long after the server last heard from it. @default 10000
   */
  sessionTimeoutMs?: number;
  /** The path every lock lives under (one child per key). @default '/nest-distributed-lock' */
  prefix?: string;
  /** How long to wait for a connection (at start and after an expired session) before failing. @default 5000 */
  connectTimeoutMs?: number;
  /** How long one request may take before failing with `LockBackendUnavailableError`. @default 2000 */
  commandTimeoutMs?: number;
}

/** What `new ZooKeeperBackend()` takes (the module builds one from `ZooKeeperBackendOptions`). */
export interface ZooKeeperBackendConfig {
  /** A connected client (the application's, or the first one of a backend that opens its own). */
  client?: ZooKeeperClientLike;
  /** Close the client in `close()`; also: a lost session's client is closed and replaced with `reconnect()`. */
  ownsClient: boolean;
  /** A new connected client, for a backend that owns its clients (after a session is lost). */
  reconnect?: () => Promise<ZooKeeperClientLike>;
  /** @default '/nest-distributed-lock' */
  prefix?: string;
  /** @default 2000 */
  commandTimeoutMs?: number;
  /** @default 0.01 */
  driftFactor?: number;
  name?: string;
}

/** `ZooKeeperBackendOptions` after `resolveZooKeeperOptions()`: defaults filled in. */
export type ResolvedZooKeeperOptions = Pick<ZooKeeperBackendOptions, 'connectionString' | 'client'> &
  Required<Pick<ZooKeeperBackendOptions, 'sessionTimeoutMs' | 'prefix' | 'connectTimeoutMs' | 'commandTimeoutMs'>>;

const FIELDS = Object.keys({
  connectionString: 1,
  client: 1,
  sessionTimeoutMs: 1,
  prefix: 1,
  connectTimeoutMs: 1,
  commandTimeoutMs: 1,
} satisfies Record<keyof ZooKeeperBackendOptions, 1>);

/** One `host:port` (a name, IPv4, or [IPv6]), then more after commas, then an optional chroot path. */
const CONNECTION_STRING = /^(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}(?:,(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5})*(?:\/[^,\s]*)?$/;

/**
 * An absolute ZooKeeper path of plain segments: `/a/b`. No trailing `/`, no empty, `.` or `..`
 * segment, not under the server's own `/zookeeper`, and only printable ASCII (ZooKeeper refuses
 * control and some Unicode characters; the keys under it are encoded, the prefix is the user's).
 */
export function checkZooKeeperPath(value: unknown, field: string, where = MODULE_OPTIONS): string {
  const ok =
    typeof value === 'string' &&
    /^(\/[\x21-\x2e\x30-\x7e]+)+$/.test(value) &&
    !value.split('/').slice(1).some((s) => s === '.' || s === '..') &&
    value !== '/zookeeper' &&
    !value.startsWith('/zookeeper/');
  if (!ok) {
    failOption(field, `must be an absolute ZooKeeper path such as '/nest-distributed-lock' (printable ASCII, no trailing '/', no '.' or '..' segment, not under /zookeeper), got ${describeValue(value)}`, where);
  }
  return value as string;
}

/** `forRoot({ zookeeper })` checked, with defaults. */
export function resolveZooKeeperOptions(raw: unknown, field: string): ResolvedZooKeeperOptions {
  if (!isPlainObject(raw)) failOption(field, "must be an object such as { connectionString: '127.0.0.1:2181' }");
  rejectUnknown(raw, FIELDS, `${field}.`);
  const { connectionString, client } = raw;
  if (client !== undefined) {
    const c = client as Record<string, unknown>;
    for (const method of ['create', 'remove', 'getChildren', 'exists', 'transaction', 'getState', 'getSessionTimeout'] as const) {
      if (typeof c?.[method] !== 'function') failOption(`${field}.client`, `must be a node-zookeeper-client Client (no ${method}())`);
    }
    if (connectionString !== undefined) failOption(`${field}.client`, 'give either client or connectionString, not both');
    if (raw.sessionTimeoutMs !== undefined) failOption(`${field}.sessionTimeoutMs`, 'applies to the client the module opens; set it on the client you pass');
  } else if (connectionString === undefined) {
    failOption(`${field}.connectionString`, "is required (or pass client): for example '127.0.0.1:2181'");
  } else if (typeof connectionString !== 'string' || !CONNECTION_STRING.test(connectionString)) {
    failOption(`${field}.connectionString`, `must be 'host:port[,host:port…][/chroot]', got ${describeValue(connectionString)}`);
  }
  const sessionTimeoutMs = raw.sessionTimeoutMs ?? ZOOKEEPER_DEFAULTS.sessionTimeoutMs;
  if (typeof sessionTimeoutMs !== 'number' || !Number.isInteger(sessionTimeoutMs) || sessionTimeoutMs < 1 || sessionTimeoutMs > 2 ** 31 - 1) {
    failOption(`${field}.sessionTimeoutMs`, `must be a whole number of ms from 1 to 2147483647 (the server clamps it to 2–20 ticks), got ${describeValue(sessionTimeoutMs)}`);
  }
  return {
    connectionString: connectionString as string | undefined,
    client: client as ZooKeeperClientLike | undefined,
    sessionTimeoutMs,
    prefix: checkZooKeeperPath(raw.prefix ?? ZOOKEEPER_DEFAULTS.prefix, `${field}.prefix`),
    connectTimeoutMs: checkPositiveMs(raw.connectTimeoutMs ?? ZOOKEEPER_DEFAULTS.connectTimeoutMs, `${field}.connectTimeoutMs`, MODULE_OPTIONS),
    commandTimeoutMs: checkPositiveMs(raw.commandTimeoutMs ?? ZOOKEEPER_DEFAULTS.commandTimeoutMs, `${field}.commandTimeoutMs`, MODULE_OPTIONS),
  };
}
