import { MODULE_OPTIONS } from '../../common/checks.util.js';
import { redactUrl, scrubCredentials } from '../../common/redact.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { ResolvedMySqlOptions } from './mysql-backend.options.js';
import type { MySqlPoolLike } from './mysql-client.interface.js';

/** Open the pool `forRoot({ mysql: { uri } })` asks for (`mysql2` is loaded only here). */
export async function createMySqlPool(o: ResolvedMySqlOptions, field: string): Promise<MySqlPoolLike> {
  let mysql: { createPool(options: Record<string, unknown>): MySqlPoolLike };
  try {
    const loaded = (await import('mysql2/promise')) as unknown as { default?: typeof mysql } & typeof mysql;
    mysql = loaded.default ?? loaded;
  } catch (error) {
    throw new InvalidLockOptionsError(field, `needs the mysql2 package (npm install mysql2): ${(error as Error).message}`, MODULE_OPTIONS);
  }
  let pool: MySqlPoolLike;
  try {
    pool = mysql.createPool({
      uri: o.uri,
      // + 2: the doorbell keeps two connections for itself (its listener and its bell's holder).
      connectionLimit: o.maxConnections + 2,
      connectTimeout: o.connectTimeoutMs,
      supportBigNumbers: true,
      bigNumberStrings: true,
      charset: 'utf8mb4',
    });
  } catch (error) {
    // mysql2's own error could carry the whole URL, password included.
    throw new InvalidLockOptionsError(`${field}.uri`, `mysql2 refused it: ${scrubCredentials((error as Error)?.message ?? String(error))} (${redactUrl(o.uri!)})`, MODULE_OPTIONS);
  }
  // Idle connections never keep the process alive (calls in flight do, through their timers), and
  // every session autocommits whatever the server's default (bootstrap refuses a pool of yours
  // whose sessions do not).
  (pool as unknown as { pool?: { on(event: 'connection', f: (c: { stream?: { unref?(): void }; query(sql: string): unknown }) => void): void } }).pool?.on('connection', (connection) => {
    connection.stream?.unref?.();
    connection.query('SET SESSION autocommit = 1');
  });
  return pool;
}
