import { checkPositiveMs, failOption, isPlainObject, MODULE_OPTIONS, rejectUnknown } from '../../common/checks.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';
import { checkRedisUrl } from '../redis/redis-backend.options.js';
import type { RedisClientLike } from '../redis/redis-client.interface.js';
import { checkRedisClient, type RedisClientInput } from '../redis/redis-client.check.js';
import { checkRedisKeyPrefix } from '../redis/redis-keys.util.js';

/**
 * No fencing tokens (a master restarted without its data can hand the key out again), and no
 * fair queue (waiters retry: per-node queues could each pick another head and split the vote).
 */
export const REDLOCK_CAPABILITIES: LockBackendCapabilities = { fencing: false, fairQueue: false, distributed: true };

/** The defaults of `forRoot({ redlock })` and of `new RedlockBackend()` alike. */
export const REDLOCK_DEFAULTS = { keyPrefix: 'lock:', connectTimeoutMs: 2_000, nodeTimeoutMs: 200, retryDelayMs: 50 } as const;

/**
 * The Redlock backend: one `efficiency` lock over several independent Redis masters, held while a
 * majority of them hold its key. It has no fencing tokens: `correctness` locks are refused.
 */
export interface RedlockBackendOptions {
  /**
   * One URL per independent Redis master (not replicas of one another, not a Cluster): an odd
   * number, at least 3. The module opens these clients and closes them on shutdown.
   * @example ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', 'redis://10.0.0.3:6379']
   */
  urls?: string[];
  /** ioredis options merged over each URL (password, tls, …). Only with `urls`. */
  options?: Record<string, unknown>;
  /**
   * ioredis `Redis` clients of independent masters that the application owns: an odd number, at
   * least 3. Never closed by this module. Mutually exclusive with `urls` / `options`.
   */
  clients?: RedisClientInput[];
  /** Prefix of every key this backend writes, on every master. @default 'lock:' */
  keyPrefix?: string;
  /**
   * How long one master may take to answer one command (the algorithm's per-node timeout): a
   * master that does not answer in time counts as a "no", so a dead master costs at most this
   * much. Keep it small against your ttls. @default 200
   */
  nodeTimeoutMs?: number;
  /** How long the module's clients wait to (re)connect before a command counts as a "no". @default 2000 */
  connectTimeoutMs?: number;
  /**
   * A waiter tries again after this long, with as much random jitter on top (a release in this
   * process wakes its own waiters at once). @default 50
   */
  retryDelayMs?: number;
}

/** `RedlockBackendOptions` after `resolveRedlockOptions()`: defaults filled in. */
export type ResolvedRedlockOptions = Pick<RedlockBackendOptions, 'urls' | 'options'> & { clients?: RedisClientLike[] } &
  Required<Pick<RedlockBackendOptions, 'keyPrefix' | 'nodeTimeoutMs' | 'connectTimeoutMs' | 'retryDelayMs'>>;

const FIELDS = Object.keys({
  urls: 1,
  options: 1,
  clients: 1,
  keyPrefix: 1,
  nodeTimeoutMs: 1,
  connectTimeoutMs: 1,
  retryDelayMs: 1,
} satisfies Record<keyof RedlockBackendOptions, 1>);

/** An odd number of masters, at least 3: a majority of an even number is no more tolerant of failures than of one fewer. */
function checkMasterCount(count: number, field: string): void {
  if (count < 3 || count % 2 === 0) {
    failOption(field, `needs an odd number of independent Redis masters, at least 3 (got ${count}): a majority of an even number tolerates no more failures than one fewer`);
  }
}

/**
 * Which server an address reaches, as far as its text tells: host and port, with the loopback
 * names of one machine as one (`localhost`, `127.0.0.1`, `[::1]`). Not the database: two databases
 * of one server are one server, whose loss takes both votes.
 */
function serverOf(hostname: string, port: string | number | undefined): string {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || host === '::1' || /^127\./.test(host);
  return `${loopback ? 'loopback' : host}:${port === undefined || port === '' ? 6379 : Number(port)}`;
}

/** Fail at the second of two masters that name one server (`what(i)` names a master's field). */
function checkDistinctServers(servers: Array<string | undefined>, field: string, what: (i: number) => string): void {
  const seen = new Map<string, number>();
  servers.forEach((server, i) => {
    if (server === undefined) return;
    const first = seen.get(server);
    if (first !== undefined) {
      failOption(`${field}${what(i)}`, `is the same server as ${what(first).slice(1)} (${server.replace(/^loopback/, 'localhost')}): every master must be a different, independent server`);
    }
    seen.set(server, i);
  });
}

/** `forRoot({ redlock })` checked, with defaults. */
export function resolveRedlockOptions(raw: unknown, field: string): ResolvedRedlockOptions {
  if (!isPlainObject(raw)) return failOption(field, "must be an object such as { urls: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'] }");
  rejectUnknown(raw, FIELDS, `${field}.`);
  const { urls, options, clients } = raw;
  let checkedUrls: string[] | undefined;
  let checkedClients: RedisClientLike[] | undefined;
  if (clients !== undefined) {
    if (urls !== undefined || options !== undefined) failOption(`${field}.clients`, 'give either clients or urls/options, not both');
    if (!Array.isArray(clients)) failOption(`${field}.clients`, 'must be an array of Redis clients (ioredis, iovalkey or node-redis), one per independent master');
    checkedClients = clients.map((client, i) => {
      const checked = checkRedisClient(client, `${field}.clients[${i}]`);
      if (checked.isCluster === true) failOption(`${field}.clients[${i}]`, 'is a Redis Cluster client: Redlock needs independent masters (a Cluster is one store; use the redis backend with it)');
      return checked;
    });
    if (new Set(clients).size !== clients.length) failOption(`${field}.clients`, 'names one client twice: every master must be a different, independent server');
    // By the address each client was given (a client over a unix socket names its path).
    const addresses = checkedClients.map((client) => {
      const o = (client as { options?: { host?: unknown; port?: unknown; path?: unknown } }).options;
      if (typeof o?.path === 'string' && o.path) return `unix:${o.path}`;
      return typeof o?.host === 'string' ? serverOf(o.host, o.port as number | undefined) : undefined;
    });
    checkDistinctServers(addresses, field, (i) => `.clients[${i}]`);
    checkMasterCount(clients.length, `${field}.clients`);
  } else {
    if (urls === undefined) failOption(field, 'needs urls (or clients): one per independent Redis master, an odd number ≥ 3');
    if (!Array.isArray(urls)) failOption(`${field}.urls`, 'must be an array of redis:// URLs, one per independent master');
    checkedUrls = urls.map((url, i) => checkRedisUrl(url, `${field}.urls[${i}]`));
    checkDistinctServers(
      checkedUrls.map((url) => {
        const where = new URL(url);
        return serverOf(where.hostname, where.port);
      }),
      field,
      (i) => `.urls[${i}]`,
    );
    checkMasterCount(checkedUrls.length, `${field}.urls`);
    if (options !== undefined && !isPlainObject(options)) failOption(`${field}.options`, 'must be an object of ioredis options');
  }
  return {
    urls: checkedUrls,
    options: options as Record<string, unknown> | undefined,
    clients: checkedClients,
    keyPrefix: checkRedisKeyPrefix(raw.keyPrefix ?? REDLOCK_DEFAULTS.keyPrefix, false, MODULE_OPTIONS, `${field}.keyPrefix`),
    nodeTimeoutMs: checkPositiveMs(raw.nodeTimeoutMs ?? REDLOCK_DEFAULTS.nodeTimeoutMs, `${field}.nodeTimeoutMs`, MODULE_OPTIONS),
    connectTimeoutMs: checkPositiveMs(raw.connectTimeoutMs ?? REDLOCK_DEFAULTS.connectTimeoutMs, `${field}.connectTimeoutMs`, MODULE_OPTIONS),
    retryDelayMs: checkPositiveMs(raw.retryDelayMs ?? REDLOCK_DEFAULTS.retryDelayMs, `${field}.retryDelayMs`, MODULE_OPTIONS),
  };
}
