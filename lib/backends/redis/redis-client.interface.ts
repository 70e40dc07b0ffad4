/**
 * The part of an ioredis (or iovalkey) `Redis` or `Cluster` client this module uses. Structural, so
 * a user of the etcd backend alone never needs ioredis installed to compile or run. A node-redis
 * client is seen through `NodeRedisClient`, which has this shape.
 */
export interface RedisClientLike {
  readonly status: string;
  /** true on an ioredis `Cluster` (hash-tag rules then decide where keys live). */
  readonly isCluster?: boolean;
  set(...args: any[]): Promise<unknown>;
  pttl(key: string): Promise<unknown>;
  ping(): Promise<unknown>;
  /** `SCAN cursor MATCH pattern COUNT n` → [next cursor, names]. */
  scan(...args: any[]): Promise<[string, string[]]>;
  /** A Cluster client's nodes (`'master'`): `list()` scans each, a `SCAN` reaching one node only. */
  nodes?(role?: string): RedisClientLike[];
  /** ioredis' options: its `keyPrefix` is added to every key sent, not to SCAN patterns. */
  readonly options?: { keyPrefix?: string };
  evalsha(...args: any[]): Promise<unknown>;
  eval(...args: any[]): Promise<unknown>;
  duplicate(...args: any[]): RedisClientLike;
  subscribe(...args: any[]): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(...args: any[]): void;
  /** Commands are held back by the client and written together later (node-redis: at the next setImmediate). */
  readonly holdsWrites?: boolean;
  /** What tells one connection from the next (ioredis: its `stream`, a new socket per connection). */
  readonly connection?: unknown;
  /** Let the process exit whatever the connection does (ioredis: its `stream.unref()`). */
  unref?(): void;
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
}
