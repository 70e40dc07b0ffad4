import { MODULE_OPTIONS } from '../../common/checks.util.js';
import { redactUrl, scrubCredentials } from '../../common/redact.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { ResolvedPostgresOptions } from './postgres-backend.options.js';
import type { PgPoolLike } from './postgres-client.interface.js';

/** Open the pool `forRoot({ postgres: { connectionString } })` asks for (`pg` is loaded only here). */
export async function createPostgresPool(o: ResolvedPostgresOptions, field: string): Promise<PgPoolLike> {
  let pg: { Pool: new (options: Record<string, unknown>) => PgPoolLike };
  try {
    const loaded = (await import('pg')) as unknown as { default?: typeof pg } & typeof pg;
    pg = loaded.default ?? loaded;
  } catch (error) {
    throw new InvalidLockOptionsError(field, `needs the pg package (npm install pg): ${(error as Error).message}`, MODULE_OPTIONS);
  }
  try {
    // allowExitOnIdle: idle connections never keep the process alive (calls in flight do).
    return new pg.Pool({ connectionString: o.connectionString, max: o.maxConnections, connectionTimeoutMillis: o.connectTimeoutMs, allowExitOnIdle: true });
  } catch (error) {
    // pg's own error could carry the whole connection string, password included.
    throw new InvalidLockOptionsError(
      `${field}.connectionString`,
      `pg refused it: ${scrubCredentials((error as Error)?.message ?? String(error))} (${redactUrl(o.connectionString!)})`,
      MODULE_OPTIONS,
    );
  }
}
