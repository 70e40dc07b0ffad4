/**
 * The part of an ioredis `Redis` or `Cluster` client this module uses. Structural, so a user of
 * the etcd backend alone never needs ioredis installed to compile or run.
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
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
}
