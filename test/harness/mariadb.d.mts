/** A MariaDB server the test run owns, on a free loopback port (root, no password, database `mysql`). */
export declare class MariaDbServer {
  static start(): Promise<MariaDbServer>;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  /** A connection string for mysql2 (`createPool(uri)`). */
  readonly url: string;
  launch(): Promise<void>;
  /** A clean shutdown, then the same data on the same port. */
  restart(): Promise<void>;
  /** kill -9; `launch()` brings it back through crash recovery. */
  kill(): Promise<void>;
  /** SIGSTOP of the server process; resolves once every thread of it has stopped. */
  pause(): Promise<void>;
  /** SIGCONT of the server process. */
  resume(): void;
  halt(signal: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}
/** mariadb-install-db and mariadbd (installed with apt-get when root and missing). */
export declare function ensureMariaDb(): { install: string; server: string };
