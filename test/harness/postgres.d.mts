export interface PgSettings {
  host: string;
  port: number;
  user: string;
  database: string;
  password?: string;
  stop(): Promise<void>;
}
export declare class PostgresServer implements PgSettings {
  static fromEnv(): PgSettings | undefined;
  static start(): Promise<PostgresServer>;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  readonly database: string;
  /** A connection string for this server. */
  readonly url: string;
  /** Fast shutdown (every session ends), then the same data on the same port. */
  restart(): Promise<void>;
  /** kill -9 of the postmaster; `launch()` brings it back through crash recovery. */
  kill(): Promise<void>;
  launch(): Promise<void>;
  /** Stop the postmaster with `signal` (SIGINT: fast shutdown), keeping its data. */
  halt(signal: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}
/** initdb and postgres of a PostgreSQL installation (installed with apt-get when root and missing). */
export declare function ensurePg(): { initdb: string; postgres: string };
