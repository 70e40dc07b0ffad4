/**
 * The part of an `etcd3` client (`Etcd3`) this module uses. Structural, so a user of the Redis
 * backend alone never needs etcd3 (or its gRPC stack) installed.
 */
export interface EtcdClientLike {
  readonly kv: {
    txn(request: unknown, options?: unknown): Promise<any>;
    range(request: unknown, options?: unknown): Promise<any>;
    deleteRange(request: unknown, options?: unknown): Promise<any>;
  };
  /** etcd3's lease RPCs: `inspect()` reads what is left of a holder's session lease with it. */
  readonly leaseClient?: { leaseTimeToLive(request: { ID: string }, options?: unknown): Promise<{ TTL: string }> };
  lease(ttlSeconds: number, options?: { autoKeepAlive?: boolean; deadline?: Date }): EtcdLeaseLike;
  watch(): EtcdWatchBuilderLike;
  close(): void;
}

export interface EtcdLeaseLike {
  grant(): Promise<string>;
  revoke(options?: { deadline?: Date }): Promise<void>;
  keepaliveOnce(options?: { deadline?: Date }): Promise<{ TTL: string }>;
  release(): void;
}

export interface EtcdWatchBuilderLike {
  key(key: string | Buffer): EtcdWatchBuilderLike;
  prefix(prefix: string | Buffer): EtcdWatchBuilderLike;
  startRevision(revision: string): EtcdWatchBuilderLike;
  only(...operations: Array<'put' | 'delete'>): EtcdWatchBuilderLike;
  /** Deliver each event's previous key-value too (a semaphore waiter reads a deleted entry's create revision). */
  withPreviousKV(): EtcdWatchBuilderLike;
  watcher(): EtcdWatcherLike;
}

export interface EtcdWatcherLike {
  on(event: string, listener: (...args: any[]) => void): unknown;
  cancel(): Promise<void>;
}
