import mysql from 'mysql2/promise';
import type { MariaDbServer } from '../harness/mariadb.mjs';
import type { Register } from './checker.js';

/** The table of the MySQL scenarios' registers: one row per run, guarded by MySqlFence. */
export const MYSQL_REGISTER_TABLE = 'fault_registers';
/** The database the MySQL scenarios' locks and registers live in (created at start). */
export const MYSQL_DATABASE = 'ndl';

/** The server's URL with the scenarios' database instead of `mysql` (optionally through `endpoint`, a proxy). */
export function mysqlUrl(server: MariaDbServer, endpoint = `${server.host}:${server.port}`): string {
  return `mysql://${server.user}@${endpoint}/${MYSQL_DATABASE}`;
}

/**
 * The controller's side of the MySQL scenarios. Every call opens a connection of its own and
 * closes it: a pooled idle connection would die with the restarts and kills the scenarios inflict.
 */
async function withConnection<T>(server: MariaDbServer, work: (connection: mysql.Connection) => Promise<T>, database = MYSQL_DATABASE): Promise<T> {
  const connection = await mysql.createConnection({ host: server.host, port: server.port, user: server.user, database, connectTimeout: 10_000 });
  connection.on('error', () => undefined);
  try {
    return await work(connection);
  } finally {
    await connection.end().catch(() => connection.destroy());
  }
}

/** The scenarios' database (once per server). */
export async function createMySqlDatabase(server: MariaDbServer): Promise<void> {
  await withConnection(server, (c) => c.query(`CREATE DATABASE IF NOT EXISTS ${MYSQL_DATABASE}`), 'mysql');
}

/** The register row a run's workers read and write through MySqlFence (fence starts at 0). */
export async function createMySqlRegister(server: MariaDbServer, name: string): Promise<void> {
  await withConnection(server, async (c) => {
    await c.query(`CREATE TABLE IF NOT EXISTS ${MYSQL_REGISTER_TABLE} (id VARCHAR(190) PRIMARY KEY, v LONGTEXT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`);
    await c.query(`INSERT INTO ${MYSQL_REGISTER_TABLE} (id, v) VALUES (?, '[]')`, [name]);
  });
}

export async function readMySqlRegister(server: MariaDbServer, name: string): Promise<Register> {
  return withConnection(server, async (c) => {
    const [rows] = (await c.query(`SELECT v FROM ${MYSQL_REGISTER_TABLE} WHERE id = ?`, [name])) as [Array<{ v: string }>, unknown];
    return JSON.parse(rows[0]?.v ?? '[]') as Register;
  });
}

/**
 * `KILL` of every session of the backend's user but this one — MySQL's pg_terminate_backend: the
 * pools, the doorbell listeners, the register's connections. Resolves with how many there were.
 */
export async function killAllSessions(server: MariaDbServer): Promise<number> {
  return withConnection(server, async (c) => {
    const [rows] = (await c.query(
      "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(USER(), '@', 1) AND ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'",
    )) as [Array<{ id: number | string }>, unknown];
    let killed = 0;
    for (const { id } of rows) {
      // ER_NO_SUCH_THREAD (1094): it ended meanwhile.
      await c.query(`KILL ${Number(id)}`).then(
        () => (killed += 1),
        (error: { errno?: number }) => {
          if (error.errno !== 1094) throw error;
        },
      );
    }
    return killed;
  });
}

/**
 * What the server is doing now (for a stall): every session, the open InnoDB transactions and
 * who waits for whose lock. A snapshot as text, for the report.
 */
export async function serverSnapshot(server: MariaDbServer): Promise<string> {
  return withConnection(server, async (c) => {
    const parts: string[] = [];
    for (const [title, sql] of [
      ['PROCESSLIST', 'SELECT ID, USER, DB, COMMAND, TIME, STATE, LEFT(INFO, 200) AS INFO FROM information_schema.PROCESSLIST ORDER BY ID'],
      ['INNODB_TRX', 'SELECT trx_id, trx_state, trx_started, trx_mysql_thread_id, trx_rows_locked, trx_lock_structs, LEFT(trx_query, 200) AS q FROM information_schema.INNODB_TRX'],
      ['INNODB_LOCK_WAITS', 'SELECT * FROM information_schema.INNODB_LOCK_WAITS'],
    ] as const) {
      const [rows] = (await c.query(sql).catch((error: Error) => [[{ error: error.message }]])) as [unknown[], unknown];
      parts.push(`${title}:\n${rows.map((r) => JSON.stringify(r)).join('\n')}`);
    }
    return parts.join('\n\n');
  });
}
