import mysql from 'mysql2/promise';
import { DistributedLockError, LockBusyError, MySqlFence, MySqlTransactionLock, StaleFencingTokenError, type MySqlQueryable } from 'nest-distributed-lock';
import type { MySqlOrmClient } from 'nest-distributed-lock/orm';
import { MariaDbServer } from './mariadb.mjs';
import { startLockApp, uniqueKey, type LockApp } from './lock-app.js';
import { afterRollback, describeAdaptedChecks, NOTE, refusal, type OrmUnderTest } from './orm-contract.js';

/**
 * The ORM adapter contract on MariaDB (orm-contract.ts): `MySqlTransactionLock` and `MySqlFence` in
 * the ORM's transaction, beside the MySQL backend's leases (the module made its tables in the
 * `orm` database; the ORMs connect to another as their default, hence the lock's `database`).
 */
export function describeOrmOnMySql(name: string, start: (server: MariaDbServer) => Promise<OrmUnderTest<MySqlOrmClient>>): void {
  describe(`${name} on MariaDB: MySqlTransactionLock and MySqlFence in the ORM's transaction`, () => {
    let server: MariaDbServer;
    let pool: mysql.Pool;
    let app: LockApp;
    let orm: OrmUnderTest<MySqlOrmClient>;
    let txLock: MySqlTransactionLock;
    const fence = new MySqlFence({ table: 'orm.accounts' });

    beforeAll(async () => {
      server = await MariaDbServer.start();
      pool = mysql.createPool({ uri: server.url, connectionLimit: 6 });
      await pool.query('CREATE DATABASE orm');
      await pool.query('CREATE TABLE orm.accounts (id VARCHAR(200) NOT NULL PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0, note TEXT NULL) ENGINE=InnoDB');
      app = await startLockApp({ mysql: { uri: server.url.replace(/\/[^/]*$/, '/orm') } });
      txLock = new MySqlTransactionLock({ pool, database: 'orm' });
      orm = await start(server);
    }, 120_000);
    afterAll(async () => {
      await orm?.close();
      await app?.close();
      await pool?.end();
      await server?.stop();
    }, 30_000);

    const insert = async (balance: number): Promise<string> => {
      const id = uniqueKey('row');
      await pool.query('INSERT INTO orm.accounts (id, balance) VALUES (?, ?)', [id, balance]);
      return id;
    };
    const row = async (id: string): Promise<Record<string, unknown>> => {
      const [rows] = await pool.query<mysql.RowDataPacket[]>('SELECT CAST(balance AS CHAR) AS balance, CAST(fence AS CHAR) AS fence, note FROM orm.accounts WHERE id = ?', [id]);
      return { ...rows[0] };
    };
    const connectionId = async (db: MySqlQueryable): Promise<number> => {
      const [rows] = (await db.query('SELECT CONNECTION_ID() AS id')) as [Array<{ id: unknown }>, unknown];
      return Number(rows[0].id);
    };

    /** `work` in a transaction of a connection of our own (not the ORM's), rolled back after. */
    const elsewhere = async <T>(work: (conn: mysql.PoolConnection) => Promise<T>): Promise<T> => {
      const conn = await pool.getConnection();
      try {
        await conn.beginTransaction();
        return await work(conn);
      } finally {
        await conn.rollback();
        conn.release();
      }
    };

    it("holds the key in the ORM's transaction (a lease and another transaction are busy) and releases it at commit", async () => {
      const key = uniqueKey('orm-commit');
      const token = await orm.transaction(async (db) => {
        const held = await txLock.acquire(db, key);
        expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
        expect(await refusal(() => elsewhere((conn) => txLock.acquire(conn, key)))).toBeInstanceOf(LockBusyError);
        return held;
      });
      const after = await app.locks.tryAcquire(key, { purpose: 'correctness', ttl: 5_000 });
      expect(after?.token).toBeGreaterThan(token);
      // The other way round: a lease holds the key, the ORM's transaction is busy for the lease's remaining time.
      const busy = await orm.transaction((db) => refusal(() => txLock.acquire(db, key)));
      expect(busy).toBeInstanceOf(LockBusyError);
      expect((busy as LockBusyError).retryAfterMs).toBeGreaterThan(3_000);
      await after?.release();
    });

    it('releases it at rollback, and the fenced write with it', async () => {
      const key = uniqueKey('orm-rollback');
      const id = await insert(10);
      await orm.transaction(async (db) => {
        const token = await txLock.acquire(db, key);
        await fence.update(db, id, { balance: 99 }, token);
        expect(await elsewhere((conn) => txLock.acquire(conn, key)).catch((e: unknown) => e)).toBeInstanceOf(LockBusyError);
      }, 'rollback').catch(afterRollback);
      expect(await row(id)).toEqual({ balance: '10', fence: '0', note: null });
      expect(await elsewhere((conn) => txLock.acquire(conn, key))).toBeGreaterThan(0n);
    });

    it("refuses a fenced write and read with a stale token, the row unchanged; an equal token is accepted with nothing changed; the newer token's values go as parameters", async () => {
      const key = uniqueKey('orm-stale');
      const id = await insert(10);
      const stale = await orm.transaction((db) => txLock.acquire(db, key));
      const newer = await app.locks.acquire(key, { purpose: 'correctness' });
      await fence.update(pool, id, { balance: 20 }, newer.token);
      await newer.release();
      const refused = await orm.transaction((db) => fence.update(db, id, { balance: 666 }, stale)).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StaleFencingTokenError);
      expect(refused).toMatchObject({ token: stale, fence: newer.token });
      expect(await orm.transaction((db) => fence.read(db, id, stale)).catch((e: unknown) => e)).toBeInstanceOf(StaleFencingTokenError);
      expect(await row(id)).toEqual({ balance: '20', fence: String(newer.token), note: null });
      // The same holder writing the same values: the UPDATE matches the row and changes nothing — the
      // adapter must report it matched (an affected-rows count of changed rows would say "removed").
      await expect(orm.transaction((db) => fence.update(db, id, { balance: 20 }, newer.token))).resolves.toMatchObject({ id });
      const token = await orm.transaction(async (db) => {
        const held = await txLock.acquire(db, key);
        expect(Number((await fence.read(db, id, held)).balance)).toBe(20);
        await fence.update(db, id, { balance: 30, note: NOTE }, held);
        return held;
      });
      expect(token).toBeGreaterThan(newer.token!);
      expect(await row(id)).toEqual({ balance: '30', fence: String(token), note: NOTE });
    });

    it('leaves nothing on the pooled connection: after a commit, a busy answer and a rollback, the next transaction on it takes the key', async () => {
      const key = uniqueKey('orm-recycled');
      const other = uniqueKey('orm-recycled-busy');
      const first = await orm.transaction(async (db) => {
        await txLock.acquire(db, key);
        return connectionId(db);
      });
      const holder = await pool.getConnection();
      try {
        await holder.beginTransaction();
        await txLock.acquire(holder, other);
        const second = await orm.transaction(async (db) => {
          expect(await refusal(() => txLock.acquire(db, other))).toBeInstanceOf(LockBusyError); // the transaction goes on: its next statement runs
          return connectionId(db);
        }, 'rollback').catch(afterRollback<number>);
        expect(second).toBe(first);
      } finally {
        await holder.rollback();
        holder.release();
      }
      const [open] = await pool.query<mysql.RowDataPacket[]>('SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?', [first]);
      expect(Number(open[0].n)).toBe(0);
      const third = await orm.transaction(async (db) => {
        await txLock.acquire(db, key);
        expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
        return connectionId(db);
      });
      expect(third).toBe(first);
      const fourth = await orm.transaction(async (db) => {
        await txLock.acquire(db, other);
        return connectionId(db);
      });
      expect(fourth).toBe(first);
    });

    it("refuses the handle outside a transaction; passes the ORM's SQL errors through unchanged; names missing tables", async () => {
      expect(await refusal(() => txLock.acquire(orm.outside(), uniqueKey('orm-outside')))).toMatchObject({ field: 'client' });
      const missing = await orm.transaction((db) => new MySqlFence({ table: 'orm.no_such_table' }).read(db, 'x', 1n)).catch((e: unknown) => e);
      expect(orm.isOrmError(missing)).toBe(true);
      expect(missing).not.toBeInstanceOf(DistributedLockError);
      expect(await refusal(() => fence.read(orm.outside(), 'no-such-row', 1n))).toBeInstanceOf(DistributedLockError); // outside a transaction: works, each statement alone
      const noTables = await orm.transaction((db) => new MySqlTransactionLock({ pool, database: 'orm', tablePrefix: 'no_such' }).acquire(db, uniqueKey('orm-tables'))).catch((e: unknown) => e);
      expect(noTables).toMatchObject({ name: 'InvalidLockOptionsError', field: 'tablePrefix' });
    });

    describeAdaptedChecks(() => orm, 'postgres', [(wrong) => fence.read(wrong as MySqlQueryable, 'x', 1n), (wrong) => txLock.acquire(wrong as MySqlOrmClient, uniqueKey('orm-wrong'))]);
  });
}
