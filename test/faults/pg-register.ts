import pg from 'pg';
import type { PostgresServer } from '../harness/postgres.mjs';
import type { Register } from './checker.js';

/** The table of the PostgreSQL scenarios' registers: one row per run, guarded by PgFence. */
export const PG_REGISTER_TABLE = 'fault_registers';

/**
 * The controller's side of the PostgreSQL scenarios. Every call opens a connection of its own and
 * closes it: a pooled idle connection would die with the restarts and kills the scenarios inflict.
 */
async function withClient<T>(server: PostgresServer, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The register row a run's workers read and write through PgFence (fence starts at 0). */
export async function createPgRegister(server: PostgresServer, name: string): Promise<void> {
  await withClient(server, async (client) => {
    await client.query(`CREATE TABLE IF NOT EXISTS ${PG_REGISTER_TABLE} (id text PRIMARY KEY, v text NOT NULL DEFAULT '[]', fence bigint NOT NULL DEFAULT 0)`);
    await client.query(`INSERT INTO ${PG_REGISTER_TABLE} (id) VALUES ($1)`, [name]);
  });
}

export async function readPgRegister(server: PostgresServer, name: string): Promise<Register> {
  return withClient(server, async (client) => {
    const { rows } = await client.query(`SELECT v FROM ${PG_REGISTER_TABLE} WHERE id = $1`, [name]);
    return JSON.parse((rows[0]?.v as string | undefined) ?? '[]') as Register;
  });
}

/** `pg_terminate_backend` of every other client session; resolves with how many there were. */
export async function terminateAllSessions(server: PostgresServer): Promise<number> {
  return withClient(server, async (client) => {
    const { rows } = await client.query(
      "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
    return rows[0].n as number;
  });
}
