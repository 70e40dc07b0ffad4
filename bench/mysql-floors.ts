import mysql from 'mysql2/promise';
import type { Implementation } from './implementations.js';

// The MySQL / MariaDB floors `npm run bench -- --backend mysql` measures ours against (issue 38).

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const owner = (): string => Math.random().toString(36).slice(2) + Date.now().toString(36);

/**
 * Raw MySQL: `GET_LOCK(key, 0)` + `RELEASE_LOCK`, polling every 1 ms while busy. A named lock belongs
 * to its session, so a lock keeps a connection checked out of a pool of 16 until it is released.
 * Nothing is written: no token, no row, nothing that outlives the connection.
 */
export async function mysqlFloor(uri: string): Promise<Implementation> {
  const pool = mysql.createPool({ uri, connectionLimit: 16 });
  return {
    name: 'mysql floor (GET_LOCK + RELEASE_LOCK)',
    backend: 'mysql',
    floor: true,
    async lock(key) {
      const connection = await pool.getConnection();
      try {
        while (Number((await connection.query<mysql.RowDataPacket[]>('SELECT GET_LOCK(?, 0) AS ok', [key]))[0][0].ok) !== 1) await sleep(1);
      } catch (error) {
        connection.destroy();
        throw error;
      }
      return async () => {
        await connection.query('SELECT RELEASE_LOCK(?)', [key]);
        connection.release();
      };
    },
    close: () => pool.end(),
  };
}

/**
 * The durable statements our backend's uncontended path sends, run raw: an INSERT of a lease row
 * (its AUTO_INCREMENT the token; ER_DUP_ENTRY: busy, poll every 1 ms) and an owner-checked DELETE,
 * each its own autocommit transaction (a deadlock of concurrent inserts counts as busy), on a table shaped like `<prefix>_held`. No queue, no expiry
 * handling, no hand-off: the floor a durable lease row allows.
 */
export async function mysqlRowFloor(uri: string): Promise<Implementation> {
  const pool = mysql.createPool({ uri, connectionLimit: 16 });
  await pool.query(`CREATE TABLE IF NOT EXISTS bench_raw_held (
    key_hash BINARY(32) NOT NULL PRIMARY KEY, lock_key VARBINARY(3072) NOT NULL, owner VARBINARY(255) NOT NULL,
    token BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB`);
  return {
    name: 'mysql rows raw (INSERT + DELETE)',
    backend: 'mysql',
    async lock(key) {
      const k = Buffer.from(key);
      const me = owner();
      for (;;) {
        try {
          await pool.query('INSERT INTO bench_raw_held (key_hash, lock_key, owner, expires_at) VALUES (UNHEX(SHA2(?, 256)), ?, ?, UTC_TIMESTAMP(6) + INTERVAL 10 SECOND)', [k, k, me]);
          break;
        } catch (error) {
          // ER_DUP_ENTRY: held. ER_LOCK_DEADLOCK: InnoDB's duplicate-key locks of concurrent inserts
          // of one key against a delete (the server rolled it back): busy too.
          const errno = (error as { errno?: number }).errno;
          if (errno !== 1062 && errno !== 1213) throw error;
          await sleep(1);
        }
      }
      return async () => void (await pool.query('DELETE FROM bench_raw_held WHERE key_hash = UNHEX(SHA2(?, 256)) AND owner = ?', [k, me]));
    },
    close: () => pool.end(),
  };
}
