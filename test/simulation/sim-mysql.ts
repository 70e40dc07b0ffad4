/**
 * The MySqlFence register of a simulation worker: a mysql2 pool of its own to the MariaDB the
 * MySQL backend uses (through the worker's register proxy), rows of MYSQL_REGISTER_TABLE read and
 * written through MySqlFence — statement by statement (each commits alone: the UPDATE's guard is
 * the check), or read + update + COMMIT in one transaction on one connection (`tx`). And the
 * MySqlTransactionLock of the worker's transaction holders (`xact` operations): its own small pool
 * (to the MySQL backend's proxy, where the backend's tables are), the transaction on a register
 * connection.
 */
import mysql from 'mysql2/promise';
import { MySqlFence, MySqlTransactionLock, type DistributedLockService, type MySqlQueryable } from '../../lib/index.js';
import { MYSQL_REGISTER_TABLE, type RegisterList } from './protocol.js';

/** A checked-out register connection in a transaction: the read, the write and COMMIT go through it. */
export interface MySqlTx {
  connection: mysql.PoolConnection;
}

export type MySqlTxEnd = 'committed' | 'rollback' | 'destroy';

export interface MySqlRegister {
  read(svc: DistributedLockService, name: string, token: bigint | undefined, tx?: MySqlTx): Promise<string | undefined>;
  /** Acknowledged once committed: with `tx`, an unanswered COMMIT is a write of unknown outcome. */
  write(svc: DistributedLockService, name: string, value: RegisterList, token: bigint | undefined, tx?: MySqlTx): Promise<void>;
  /**
   * START TRANSACTION on a connection of its own (READ COMMITTED when asked: SET TRANSACTION first);
   * `end` gives it back, rolls back, or closes it (the server then rolls back).
   */
  begin(isolation?: 'read-committed'): Promise<MySqlTx & { end(how: MySqlTxEnd): void }>;
  /** The fenced UPDATE in `tx`, not committed (an `xact` holder commits, rolls back or drops it after). */
  update(svc: DistributedLockService, name: string, value: RegisterList, token: bigint, tx: MySqlTx): Promise<void>;
  /** The transaction holders' lock: its statements through a pool of its own (the backend's database). */
  readonly txLock: MySqlTransactionLock;
  /** The row's value as it is (the probe's final read), no fence. */
  value(name: string): Promise<RegisterList | null>;
  end(): Promise<void>;
}

function timeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sim: no answer within ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

type PoolEvents = { on(event: string, f: (c: { on(e: string, f: () => void): void; query(sql: string): void }) => void): void };

/** `url`: the register's (through the worker's register proxy); `lockUrl`: the MySqlTransactionLock pool's (the backend's proxy). */
export function mysqlRegister(url: string, lockUrl = url): MySqlRegister {
  const pool = mysql.createPool({ uri: url, connectionLimit: 4, connectTimeout: 1_000, idleTimeout: 2_000 });
  // A killed session, a restarted server: never a crash. A statement waits at most 1.2 s on the
  // server and a row lock (a paused holder's open transaction) at most 1 s, as the PgFence pool's.
  (pool as unknown as PoolEvents).on('connection', (connection) => {
    connection.on('error', () => undefined);
    connection.query('SET SESSION innodb_lock_wait_timeout = 1, max_statement_time = 1.2');
  });
  // The lock's bookkeeping pool: apart from the register's, whose connections the transactions hold.
  const lockPool = mysql.createPool({ uri: lockUrl, connectionLimit: 2, connectTimeout: 1_000, idleTimeout: 2_000 });
  (lockPool as unknown as PoolEvents).on('connection', (connection) => connection.on('error', () => undefined));
  const txLock = new MySqlTransactionLock({ pool: lockPool, commandTimeoutMs: 1_500 });
  const fenceFor = (svc: DistributedLockService): MySqlFence => new MySqlFence({ table: MYSQL_REGISTER_TABLE, leases: svc, lockKey: (id) => String(id) });
  const db = (tx?: MySqlTx): MySqlQueryable => (tx?.connection ?? pool) as unknown as MySqlQueryable;
  return {
    read: async (svc, name, token, tx) => (await timeout(fenceFor(svc).read(db(tx), name, token), 1_500)).v as string | undefined,
    write: async (svc, name, value, token, tx) => {
      await timeout(fenceFor(svc).update(db(tx), name, { v: JSON.stringify(value) }, token), 1_500);
      if (tx) await timeout(tx.connection.query('COMMIT'), 1_500);
    },
    update: async (svc, name, value, token, tx) => {
      await timeout(fenceFor(svc).update(db(tx), name, { v: JSON.stringify(value) }, token), 1_500);
    },
    txLock,
    begin: async (isolation) => {
      const connection = await timeout(pool.getConnection(), 1_500);
      let ended = false;
      const end = (how: MySqlTxEnd): void => {
        if (ended) return;
        ended = true;
        if (how === 'committed') connection.release();
        else if (how === 'destroy') connection.destroy();
        else
          timeout(connection.query('ROLLBACK'), 1_500).then(
            () => connection.release(),
            () => connection.destroy(),
          );
      };
      try {
        if (isolation === 'read-committed') await timeout(connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED'), 1_500);
        await timeout(connection.query('START TRANSACTION'), 1_500);
      } catch (error) {
        end('destroy');
        throw error;
      }
      return { connection, end };
    },
    value: async (name) => {
      const [rows] = (await pool.query(`SELECT v FROM ${MYSQL_REGISTER_TABLE} WHERE id = ?`, [name])) as [Array<{ v: string }>, unknown];
      return rows[0]?.v ? (JSON.parse(rows[0].v) as RegisterList) : null;
    },
    end: () => Promise.race([Promise.all([pool.end(), lockPool.end()]).then(() => undefined), new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref())]),
  };
}
