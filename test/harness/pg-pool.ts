import pg from 'pg';
import type { PgSettings } from './postgres.mjs';

/**
 * A pg Pool whose `end()` resolves only once every connection has closed. `pool.end()` resolves
 * earlier; stopping PostgreSQL then makes a backend that has not read its client's Terminate send
 * FATAL 57P01 to that idle client, which the pool (no 'error' listener) throws as unhandled.
 */
export function closablePool(server: PgSettings): { pool: pg.Pool; end(): Promise<void> } {
  const pool = new pg.Pool({ host: server.host, port: server.port, user: server.user, database: server.database, password: server.password });
  let connections = 0;
  pool.on('connect', () => (connections += 1));
  pool.on('remove', () => (connections -= 1)); // emitted once the client's connection has ended
  return {
    pool,
    end: async () => {
      await pool.end();
      while (connections > 0) await new Promise((resolve) => pool.once('remove', resolve));
    },
  };
}
