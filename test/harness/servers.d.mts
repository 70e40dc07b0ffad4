/** A TCP port on 127.0.0.1 below the ephemeral range, reserved for this process across every test process on the machine. */
export declare function freePort(): Promise<number>;
/** Whether the socket listening on `port` belongs to process `pid` (undefined where /proc cannot tell). */
export declare function listensOn(pid: number, port: number): boolean | undefined;
/** Throw unless the server listening on `port` is `child` itself. */
export declare function assertOwnListener(child: import('node:child_process').ChildProcess, port: number, what: string): void;
export declare function ensureBinary(binary: string): string;
/** apt-get install (root with apt-get only); true when installed. */
export declare function aptInstall(packages: string[]): boolean;
export declare class RedisServer {
  static start(options?: { port?: number; appendonly?: boolean; cluster?: boolean }): Promise<RedisServer>;
  /** A Sentinel (redis-server --sentinel) monitoring `master` as "mymaster" with quorum 1. */
  static startSentinel(master: RedisServer): Promise<RedisServer>;
  readonly port: number;
  /** A cluster-mode server's bus port. */
  readonly busPort: number | undefined;
  readonly url: string;
  readonly pid: number | undefined;
  readonly running: boolean;
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
