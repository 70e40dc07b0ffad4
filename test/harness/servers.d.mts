export declare function freePort(): Promise<number>;
export declare function ensureBinary(binary: string): string;
/** apt-get install (root with apt-get only); true when installed. */
export declare function aptInstall(packages: string[]): boolean;
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
export declare class EtcdMember {
  readonly name: string;
  readonly endpoint: string;
  readonly url: string;
  readonly pid: number | undefined;
  readonly running: boolean;
  isLeader(): Promise<boolean>;
  kill9(): Promise<void>;
  restart(): Promise<void>;
  pause(): void;
  resume(): void;
}
export declare class EtcdCluster {
  static start(options?: { size?: number; heartbeatMs?: number; electionMs?: number }): Promise<EtcdCluster>;
  readonly members: EtcdMember[];
  readonly hosts: string[];
  waitHealthy(timeoutMs?: number): Promise<void>;
  leader(timeoutMs?: number): Promise<EtcdMember>;
  metric(name: string): Promise<number>;
  stop(): Promise<void>;
}
