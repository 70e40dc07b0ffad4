export declare function freePort(): Promise<number>;
export declare function ensureBinary(binary: string): string;
export declare class RedisServer {
  static start(options?: { port?: number; appendonly?: boolean; cluster?: boolean }): Promise<RedisServer>;
  /** A Sentinel (redis-server --sentinel) monitoring `master` as "mymaster" with quorum 1. */
  static startSentinel(master: RedisServer): Promise<RedisServer>;
  readonly port: number;
  readonly url: string;
  readonly pid: number | undefined;
  kill9(): Promise<void>;
  restart(): Promise<void>;
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}
