import { EventEmitter } from 'node:events';
import type { RedisClientLike } from './redis-client.interface.js';

/**
 * The part of a node-redis v5/v6 client (`createClient`, `createCluster`, `createSentinel` of the
 * `redis` package) this module uses. Structural: node-redis is never imported, so a user of
 * ioredis never loads it.
 */
export interface NodeRedisLike {
  readonly isOpen: boolean;
  /** Absent on node-redis 5's Cluster: open counts as ready there (it routes and reconnects per node). */
  readonly isReady?: boolean;
  /** How many connections the client has opened (node-redis ≥ 5.10): tells a reconnection. */
  readonly socketEpoch?: number;
  sendCommand(...args: any[]): Promise<unknown>;
  duplicate(overrides?: object): NodeRedisLike;
  connect(): Promise<unknown>;
  SUBSCRIBE?(channels: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  subscribe?(channels: string, listener: (message: string, channel: string) => void): Promise<unknown>;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): unknown;
  unref?(): void;
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  off?(event: string, listener: (...args: any[]) => void): unknown;
  /** node-redis 6's `keyPrefix` option, as its commands apply it. */
  readonly _keyPrefix?: string | Buffer;
  /** Its options (node-redis: `url`, `socket: { host, port, path }`). */
  readonly options?: { url?: unknown; socket?: { host?: unknown; port?: unknown; path?: unknown } };
  /** A Cluster's masters, and the client of one of them. */
  readonly masters?: readonly unknown[];
  nodeClient?(node: unknown): NodeRedisLike | Promise<NodeRedisLike>;
  /** Only on a Sentinel client. */
  getMasterNode?(): unknown;
}

/** Which `sendCommand` a node-redis client has: a client's (args), a Cluster's (firstKey, isReadonly, args), a Sentinel's (isReadonly, args). */
type Kind = 'client' | 'cluster' | 'sentinel';

/** The node-redis shape of `client`, or undefined when it is not a node-redis client. */
export function nodeRedisKind(client: unknown): Kind | undefined {
  const c = client as Partial<NodeRedisLike> | null;
  if (typeof c !== 'object' || c === null || typeof c.sendCommand !== 'function' || typeof c.isOpen !== 'boolean') return undefined;
  if (typeof c.duplicate !== 'function' || typeof c.connect !== 'function') return undefined;
  if (typeof c.nodeClient === 'function' && Array.isArray(c.masters)) return 'cluster';
  if (typeof c.getMasterNode === 'function') return 'sentinel';
  return 'client';
}

/**
 * node-redis' default reply types (strings, numbers, arrays), whatever the application's client was
 * given (`withTypeMapping`, `commandOptions`): a client that maps strings to Buffers must not make an
 * owner id compare unequal.
 */
const DEFAULT_REPLIES = { typeMapping: {} };

const arg = (value: unknown): string | Buffer => (typeof value === 'string' || Buffer.isBuffer(value) ? value : String(value));

/**
 * A node-redis client seen as the ioredis-shaped `RedisClientLike` the Redis backend, Redlock and
 * `RedisFence` run on. Every command goes by `sendCommand` (node-redis' own key prefix, if set,
 * is not applied: the module's `keyPrefix` names its keys), routed by its first key on a Cluster.
 * What differs from ioredis, and what the backend does about it:
 * - node-redis writes a tick's commands together at the next `setImmediate`: `holdsWrites`, so a
 *   waiter handed a key asks the server before its work starts (as with ioredis' auto-pipelining);
 * - a command written before a connection broke is failed, not resent, and one not yet written
 *   waits for the next connection (its offline queue): `connection` tells a reconnection, after
 *   which an acquire of unknown outcome is cleaned up once more;
 * - subscriptions take a listener and are renewed by node-redis after a reconnection.
 */
export class NodeRedisClient implements RedisClientLike {
  readonly isCluster: boolean;
  readonly holdsWrites = true;
  private readonly messages = new EventEmitter();
  private readonly channels = new Set<string>();
  private readonly onMessage = (message: string, channel: string): void => void this.messages.emit('message', channel, message);
  /** quit() or disconnect() was called (on a copy of ours: the application's client is never closed by us). */
  private closed = false;
  /** A copy's connect() is over. */
  private connected = false;

  constructor(
    /** The application's node-redis client (or one we duplicated from it). */
    readonly raw: NodeRedisLike,
    private readonly kind: Kind = nodeRedisKind(raw) ?? 'client',
    private readonly route?: (firstKey: string | Buffer | undefined, args: Array<string | Buffer>) => Promise<unknown>,
    /** A duplicate's connect(): a Cluster takes no SUBSCRIBE before it knows its slots. */
    private readonly connecting?: Promise<unknown>,
  ) {
    this.isCluster = kind === 'cluster';
  }

  /** Where it connects, as ioredis' options say it (Redlock tells its masters apart by it). */
  get options(): { host?: string; port?: number; path?: string; keyPrefix?: string } | undefined {
    const keyPrefix = this.prefix === undefined ? undefined : this.prefix.toString();
    const where = this.address();
    return keyPrefix === undefined ? where : { ...where, keyPrefix };
  }

  /** The client's own key prefix (node-redis 6 `keyPrefix`), applied to the keys we send as ioredis applies its own. */
  private get prefix(): string | Buffer | undefined {
    const prefix = this.raw._keyPrefix;
    return prefix === undefined || prefix.length === 0 ? undefined : prefix;
  }

  private prefixed(key: unknown): unknown {
    const prefix = this.prefix;
    if (prefix === undefined) return key;
    if (typeof prefix === 'string' && typeof key === 'string') return prefix + key;
    return Buffer.concat([Buffer.from(prefix), Buffer.from(arg(key))]);
  }

  private address(): { host?: string; port?: number; path?: string } | undefined {
    const { url, socket } = this.raw.options ?? {};
    if (typeof socket?.path === 'string') return { path: socket.path };
    if (typeof socket?.host === 'string' || typeof socket?.port === 'number') {
      return { host: typeof socket.host === 'string' ? socket.host : 'localhost', port: typeof socket.port === 'number' ? socket.port : 6379 };
    }
    if (typeof url !== 'string') return undefined;
    try {
      const parsed = new URL(url);
      return { host: parsed.hostname.replace(/^\[|\]$/g, '') || 'localhost', port: Number(parsed.port) || 6379 };
    } catch {
      return undefined;
    }
  }

  /**
   * ioredis' names for node-redis' state: a client neither open nor ready is closed (or was never
   * connected); a copy of ours is 'connecting' until its connect() is over (node-redis 5's Cluster
   * has no isReady, and is open while it still discovers its nodes).
   */
  get status(): string {
    const { isOpen, isReady } = this.raw;
    if (this.closed || !isOpen) return 'end';
    if (this.connecting && !this.connected) return 'connecting';
    return (isReady ?? isOpen) ? 'ready' : 'reconnecting';
  }

  /** A new number after each reconnection (RedisCommands compares it as it compares ioredis' socket). */
  get connection(): unknown {
    return this.raw.socketEpoch;
  }

  private send(firstKey: unknown, args: unknown[]): Promise<unknown> {
    const command = args.map(arg);
    const key = firstKey === undefined ? undefined : arg(firstKey);
    if (this.route) return this.route(key, command);
    switch (this.kind) {
      case 'cluster':
        return this.raw.sendCommand(key, false, command, DEFAULT_REPLIES);
      case 'sentinel':
        return this.raw.sendCommand(false, command, DEFAULT_REPLIES);
      default:
        return this.raw.sendCommand(command, DEFAULT_REPLIES);
    }
  }

  set(key: unknown, ...args: unknown[]): Promise<unknown> {
    const k = this.prefixed(key);
    return this.send(k, ['SET', k, ...args]);
  }

  pttl(key: string): Promise<unknown> {
    const k = this.prefixed(key);
    return this.send(k, ['PTTL', k]);
  }

  ping(): Promise<unknown> {
    return this.send(undefined, ['PING']);
  }

  /** `INFO section` (Redlock tells masters on one server apart by its run_id). */
  info(section: string): Promise<unknown> {
    return this.send(undefined, ['INFO', section]);
  }

  async scan(...args: unknown[]): Promise<[string, string[]]> {
    const [cursor, names] = (await this.send(undefined, ['SCAN', ...args])) as [unknown, unknown[]];
    return [String(cursor), names.map(String)];
  }

  /** A Cluster's masters, each asked by its own client (`list()` scans each). */
  nodes(): RedisClientLike[] {
    if (this.kind !== 'cluster') return [this];
    const cluster = this.raw;
    return (cluster.masters ?? []).map((master) => new NodeRedisClient(cluster, 'client', async (_key, args) => (await cluster.nodeClient!(master)).sendCommand(args, DEFAULT_REPLIES)));
  }

  evalsha(sha: string, numKeys: number, ...rest: unknown[]): Promise<unknown> {
    return this.script('EVALSHA', sha, numKeys, rest);
  }

  eval(lua: string, numKeys: number, ...rest: unknown[]): Promise<unknown> {
    return this.script('EVAL', lua, numKeys, rest);
  }

  /** EVAL/EVALSHA, the client's key prefix on its KEYS (as ioredis puts its own). */
  private script(command: string, script: string, numKeys: number, rest: unknown[]): Promise<unknown> {
    const keys = rest.slice(0, numKeys).map((key) => this.prefixed(key));
    return this.send(keys[0], [command, script, numKeys, ...keys, ...rest.slice(numKeys)]);
  }

  /**
   * A connection of our own beside the application's (the wake channel's subscriber), connecting
   * now: commands wait in node-redis' queue until it is ready. ioredis-only options are ignored.
   */
  duplicate(): RedisClientLike {
    const copy = this.raw.duplicate();
    copy.on('error', () => undefined); // before connect(): an 'error' without a listener throws
    const connecting = copy.connect();
    const duplicate = new NodeRedisClient(copy, this.kind, undefined, connecting);
    connecting.then(
      () => {
        duplicate.connected = true;
        // Closed while it connected (node-redis 5's Cluster goes on discovering its nodes past a
        // close(), and connects them): close what the connection made.
        if (duplicate.closed) duplicate.destroy();
      },
      () => {
        if (duplicate.closed) duplicate.destroy();
      }, // its failure reaches whoever subscribes
    );
    return duplicate;
  }

  /** SUBSCRIBE, its messages emitted as ioredis emits them: `('message', channel, message)`. */
  async subscribe(channel: string): Promise<unknown> {
    const subscribe = this.raw.SUBSCRIBE ?? this.raw.subscribe;
    if (typeof subscribe !== 'function') throw new Error('this node-redis client cannot SUBSCRIBE');
    // Once per channel: node-redis subscribes again by itself after a reconnection.
    if (this.channels.has(channel)) return undefined;
    this.channels.add(channel);
    try {
      await this.connecting;
      if (this.closed) throw new Error('the subscriber was closed while it connected');
      return await subscribe.call(this.raw, channel, this.onMessage);
    } catch (error) {
      this.channels.delete(channel);
      throw error;
    }
  }

  /** Close after the commands in flight are answered (a copy still connecting: now). */
  async quit(): Promise<unknown> {
    this.closed = true;
    if (this.connecting && !this.connected) return this.destroy();
    const raw = this.raw;
    return typeof raw.close === 'function' ? raw.close() : raw.quit?.();
  }

  /** Close now, failing what is in flight. */
  disconnect(): void {
    this.closed = true;
    this.destroy();
  }

  private destroy(): void {
    const raw = this.raw;
    if (typeof raw.destroy === 'function') void raw.destroy();
    else void raw.disconnect?.();
  }

  /** Let the process exit whatever this connection does (connections we own only). */
  unref(): void {
    this.raw.unref?.();
  }

  on(event: string, listener: (...args: any[]) => void): this {
    if (event === 'message') this.messages.on(event, listener);
    else this.raw.on(event, listener);
    return this;
  }

  once(event: string, listener: (...args: any[]) => void): this {
    if (event === 'message') this.messages.once(event, listener);
    else this.raw.once(event, listener);
    return this;
  }

  off(event: string, listener: (...args: any[]) => void): this {
    if (event === 'message') this.messages.off(event, listener);
    else this.raw.off?.(event, listener);
    return this;
  }
}
