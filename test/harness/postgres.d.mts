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
  stop(): Promise<void>;
}
