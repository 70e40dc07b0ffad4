/** The java binary (ZooKeeper installed with apt-get when root and missing; else an error naming the packages). */
export declare function ensureZooKeeper(): string;
export declare function fourLetter(port: number, word: string, timeoutMs?: number): Promise<string>;
export declare class ZooKeeperServer {
  static start(options?: { tickTimeMs?: number; maxSessionTimeoutMs?: number }): Promise<ZooKeeperServer>;
  readonly port: number;
  readonly connectionString: string;
  readonly pid: number | undefined;
  readonly running: boolean;
  /** Rewrite zoo.cfg for the next launch (restart). */
  configure(options?: { maxSessionTimeoutMs?: number }): void;
  kill9(): Promise<void>;
  restart(): Promise<void>;
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}
