import mysql from 'mysql2/promise';
import { DistributedLockError, MySqlFence, StaleFencingTokenError, type MySqlQueryable } from 'nest-distributed-lock';
import type { MySqlOrmClient } from 'nest-distributed-lock/orm';
import { MariaDbServer } from './mariadb.mjs';
import { uniqueKey } from './lock-app.js';
import { afterRollback, describeAdaptedChecks, NOTE, refusal, type OrmUnderTest } from './orm-contract.js';

/**
 * The ORM adapter contract on MariaDB (orm-contract.ts): `MySqlFence` in the ORM's transaction. No
 * MySQL lock backend exists yet, so the lock is the fence's own row lock (`SELECT … FOR UPDATE`)
 * and the tokens are given explicitly.
 */
export function describeOrmOnMySql(name: string, start: (server: MariaDbServer) => Promise<OrmUnderTest<MySqlOrmClient>>): void {
  describe(`${name} on MariaDB: MySqlFence in the ORM's transaction`, () => {
    let server: MariaDbServer;
    let pool: mysql.Pool;
    let orm: OrmUnderTest<MySqlOrmClient>;
    const fence = new MySqlFence({ table: 'orm.accounts' });

    beforeAll(async () => {
      server = await MariaDbServer.start();
      pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
      await pool.query('CREATE DATABASE orm');
      await pool.query('CREATE TABLE orm.accounts (id VARCHAR(200) NOT NULL PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0, note TEXT NULL) ENGINE=InnoDB');
      orm = await start(server);
    }, 120_000);
    afterAll(async () => {
      await orm?.close();
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
    /** Whether another connection's transaction finds the row locked (`FOR UPDATE NOWAIT`: no wait). */
    const lockedElsewhere = async (id: string): Promise<boolean> => {
      const conn = await pool.getConnection();
      try {
        await conn.beginTransaction();
        await conn.query('SELECT id FROM orm.accounts WHERE id = ? FOR UPDATE NOWAIT', [id]);
        return false;
      } catch (error) {
        if ((error as { errno?: number }).errno === 1205) return true; // lock wait timeout: NOWAIT's answer
        throw error;
      } finally {
        await conn.rollback();
        conn.release();
      }
    };
    const connectionId = async (db: MySqlQueryable): Promise<number> => {
      const [rows] = (await db.query('SELECT CONNECTION_ID() AS id')) as [Array<{ id: unknown }>, unknown];
      return Number(rows[0].id);
    };

    it("holds the row in the ORM's transaction (another transaction cannot lock it) and releases it at commit", async () => {
      const id = await insert(10);
      await orm.transaction(async (db) => {
        await fence.read(db, id, 5n);
        expect(await lockedElsewhere(id)).toBe(true);
      });
      expect(await lockedElsewhere(id)).toBe(false);
      expect(await row(id)).toEqual({ balance: '10', fence: '5', note: null });
    });

    it('releases it at rollback, and the fenced write with it', async () => {
      const id = await insert(10);
      await orm.transaction(async (db) => {
        await fence.update(db, id, { balance: 99 }, 7n);
        expect(await lockedElsewhere(id)).toBe(true);
      }, 'rollback').catch(afterRollback);
      expect(await lockedElsewhere(id)).toBe(false);
      expect(await row(id)).toEqual({ balance: '10', fence: '0', note: null });
    });

    it("refuses a fenced write and read with a stale token, the row unchanged; an equal token is accepted with nothing changed; a newer one's values go as parameters", async () => {
      const id = await insert(10);
      await fence.update(pool, id, { balance: 20 }, 9n);
      const refused = await orm.transaction((db) => fence.update(db, id, { balance: 666 }, 8n)).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(StaleFencingTokenError);
      expect(refused).toMatchObject({ token: 8n, fence: 9n });
      expect(await orm.transaction((db) => fence.read(db, id, 8n)).catch((e: unknown) => e)).toBeInstanceOf(StaleFencingTokenError);
      expect(await row(id)).toEqual({ balance: '20', fence: '9', note: null });
      // The same holder writing the same values: the UPDATE matches the row and changes nothing — the
      // adapter must report it matched (an affected-rows count of changed rows would say "removed").
      await expect(orm.transaction((db) => fence.update(db, id, { balance: 20 }, 9n))).resolves.toMatchObject({ id });
      const token = 2n ** 62n + 1n; // not a double
      await orm.transaction((db) => fence.update(db, id, { balance: 30, note: NOTE }, token));
      expect(await row(id)).toEqual({ balance: '30', fence: String(token), note: NOTE });
    });

    it('leaves nothing on the pooled connection: after a commit and a rollback, no transaction or lock is left and the next transaction on it locks the row', async () => {
      const id = await insert(10);
      const first = await orm.transaction(async (db) => {
        await fence.read(db, id, 10n);
        return connectionId(db);
      });
      const second = await orm.transaction(async (db) => {
        await fence.update(db, id, { balance: 1 }, 11n);
        return connectionId(db);
      }, 'rollback').catch(afterRollback<number>);
      expect(second).toBe(first);
      const [open] = await pool.query<mysql.RowDataPacket[]>('SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?', [first]);
      expect(Number(open[0].n)).toBe(0);
      expect(await lockedElsewhere(id)).toBe(false);
      const third = await orm.transaction(async (db) => {
        await fence.read(db, id, 11n);
        expect(await lockedElsewhere(id)).toBe(true);
        return connectionId(db);
      });
      expect(third).toBe(first);
      expect(await row(id)).toEqual({ balance: '10', fence: '11', note: null });
    });

    it("passes the ORM's SQL errors through unchanged; outside a transaction each statement runs alone", async () => {
      const missing = await orm.transaction((db) => new MySqlFence({ table: 'orm.no_such_table' }).read(db, 'x', 1n)).catch((e: unknown) => e);
      expect(orm.isOrmError(missing)).toBe(true);
      expect(missing).not.toBeInstanceOf(DistributedLockError);
      expect(await refusal(() => fence.read(orm.outside(), 'no-such-row', 1n))).toBeInstanceOf(DistributedLockError); // outside a transaction: works, each statement alone
    });

    describeAdaptedChecks(() => orm, 'postgres', [(wrong) => fence.read(wrong as MySqlQueryable, 'x', 1n)]);
  });
}
