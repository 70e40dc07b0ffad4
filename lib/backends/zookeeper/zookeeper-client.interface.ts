/**
 * The part of a `node-zookeeper-client` `Client` this module uses. Structural, so a user of the
 * other backends never needs the package installed.
 */
export interface ZooKeeperStatLike {
  /** 8-byte big-endian zxids. */
  readonly czxid: Buffer;
  readonly pzxid: Buffer;
  /** The zxid of the latest write of the znode's data (a `setData` answers with its own). */
  readonly mzxid: Buffer;
  /** How many times the znode's data was written (0: never since its create). */
  readonly version: number;
  /** A line's parent: how many holders and waiters are in it. */
  readonly numChildren: number;
}

export type ZooKeeperCallback<T> = (error: Error | null | undefined, result: T, extra?: any) => void;

/** One result of a multi-op (`transaction().commit()`): a create's path, a setData's stat, a failed op's `err` (0: would have succeeded). */
export interface ZooKeeperOpResult {
  readonly path?: string;
  readonly stat?: ZooKeeperStatLike;
  readonly err?: number;
}

/** A multi-op: every operation applied at one zxid, or none. */
export interface ZooKeeperTransactionLike {
  create(path: string, data: Buffer | undefined, acls: undefined, mode: number): ZooKeeperTransactionLike;
  setData(path: string, data: Buffer, version: number): ZooKeeperTransactionLike;
  remove(path: string, version: number): ZooKeeperTransactionLike;
  commit(callback: (error: Error | null | undefined, results: ZooKeeperOpResult[] | undefined) => void): void;
}

export interface ZooKeeperClientLike {
  create(path: string, data: Buffer | undefined, mode: number, callback: ZooKeeperCallback<string>): void;
  create(path: string, callback: ZooKeeperCallback<string>): void;
  remove(path: string, version: number, callback: (error: Error | null | undefined) => void): void;
  getChildren(path: string, callback: (error: Error | null | undefined, children: string[], stat: ZooKeeperStatLike) => void): void;
  getChildren(path: string, watcher: ((event: unknown) => void) | undefined, callback: (error: Error | null | undefined, children: string[], stat: ZooKeeperStatLike) => void): void;
  setData(path: string, data: Buffer | undefined, version: number, callback: ZooKeeperCallback<ZooKeeperStatLike>): void;
  getData(path: string, watcher: ((event: unknown) => void) | undefined, callback: ZooKeeperCallback<Buffer | undefined>): void;
  transaction(): ZooKeeperTransactionLike;
  exists(path: string, watcher: ((event: unknown) => void) | undefined, callback: ZooKeeperCallback<ZooKeeperStatLike | null>): void;
  getState(): { readonly name: string; readonly code: number };
  getSessionTimeout(): number;
  getSessionId(): Buffer;
  connect(): void;
  close(): void;
  on(event: string, listener: (...args: any[]) => void): unknown;
  once(event: string, listener: (...args: any[]) => void): unknown;
  removeListener(event: string, listener: (...args: any[]) => void): unknown;
}

/** node-zookeeper-client's `CreateMode.EPHEMERAL_SEQUENTIAL` and `PERSISTENT`. */
export const EPHEMERAL_SEQUENTIAL = 3;
export const PERSISTENT = 0;

/** ZooKeeper's error codes (`Exception.getCode()`) this module acts on. */
export const ZK_ERRORS = { CONNECTION_LOSS: -4, NO_NODE: -101, NODE_EXISTS: -110, SESSION_EXPIRED: -112 } as const;

/** The ZooKeeper error code of a client error, or of the one a `LockBackendUnavailableError` wraps. */
export function zkErrorCode(error: unknown): number | undefined {
  for (let e = error as { getCode?: () => number; cause?: unknown } | undefined, depth = 0; e && depth < 3; e = e.cause as typeof e, depth++) {
    if (typeof e.getCode === 'function') return e.getCode();
  }
  return undefined;
}
