/**
 * The parts of `pg` (node-postgres) the PostgreSQL backend uses, structurally: a user of another
 * backend never loads `pg`, and a `pg.Pool` the application owns fits as it is.
 */
export interface PgQueryResultLike {
  rows: Array<Record<string, unknown>>;
}

/** One checked-out connection (`pg.PoolClient`). */
export interface PgPoolClientLike {
  query(text: string, values?: unknown[]): Promise<PgQueryResultLike>;
  on(event: 'notification', listener: (message: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error' | 'end', listener: (error?: Error) => void): unknown;
  removeListener(event: 'error', listener: (error?: Error) => void): unknown;
  removeAllListeners(event?: string): unknown;
  /** Give it back to the pool; with an error (or `true`), the pool closes it instead. */
  release(destroy?: Error | boolean): void;
}

/** A named (prepared) statement: parsed once per connection, then only bound and run. */
export interface PgQueryConfigLike {
  name: string;
  text: string;
  values?: unknown[];
}

/** A `pg.Pool`. */
export interface PgPoolLike {
  query(text: string | PgQueryConfigLike, values?: unknown[]): Promise<PgQueryResultLike>;
  connect(): Promise<PgPoolClientLike>;
  /** The callback form: called in the same turn as the pool hands the client over (see pg-checkout.ts). */
  connect(callback: (error: Error | undefined, client: PgPoolClientLike | undefined, release: (destroy?: Error | boolean) => void) => void): void;
  end(): Promise<void>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}
