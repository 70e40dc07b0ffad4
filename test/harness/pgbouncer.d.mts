import type { PgSettings } from './postgres.mjs';

export declare class PgBouncer {
  /** A PgBouncer in front of `server`, in `mode` ('transaction' is PgBouncer's usual production mode). */
  static start(server: PgSettings, mode: 'transaction' | 'session'): Promise<PgBouncer>;
  readonly port: number;
  /** A connection string through the pooler. */
  readonly url: string;
  stop(): Promise<void>;
}
export declare function ensurePgBouncer(): string;
