import type pg from 'pg';
import { DistributedLockError, LockBusyError, PgFence, PgTransactionLock, StaleFencingTokenError, type PgQueryable } from 'nest-distributed-lock';
import type { PgOrmClient } from 'nest-distributed-lock/orm';
import { afterRollback, describeAdaptedChecks, NOTE, refusal, type OrmUnderTest } from './orm-contract.js';
import { closablePool } from './pg-pool.js';
import { PostgresServer } from './postgres.mjs';
import { startLockApp, uniqueKey, type LockApp } from './lock-app.js';

/**
 * The ORM adapter contract on PostgreSQL (orm-contract.ts): \`PgTransactionLock\` and \`PgFence\` in
 * the ORM's transaction, beside the PostgreSQL backend's leases on the same keys.
 */
export function describeOrmOnPostgres(name: string, start: (server: PostgresServer) => Promise<OrmUnderTest<PgOrmClient>>): void {
  describe(`${name} on PostgreSQL: PgTransactionLock and PgFence in the ORM's transaction`, () => {
    let server: PostgresServer;
    let app: LockApp;
    let pool: pg.Pool;
    let endPool: () => Promise<void>;
    let orm: OrmUnderTest<PgOrmClient>;
    const txLock = new PgTransactionLock();
    const fence = new PgFence({ table: 'orm_accounts' });

    beforeAll(async () => {
      server = await PostgresServer.start();
      app = await startLockApp({ postgres: { connectionString: server.url } }); // creates the backend's functions
      ({ pool, end: endPool } = closablePool(server));
      await pool.query('CREATE TABLE orm_accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0, note text, tags text[])');
      orm = await start(server);
    }, 120_000);
    afterAll(async () => {
      await orm?.close();
      await app?.close();
      await endPool?.();
      await server?.stop();
    }, 30_000);

    const insert = async (balance: number): Promise<string> => {
      const id = uniqueKey('row');
      await pool.query('INSERT INTO orm_accounts (id, balance) VALUES ($1, $2)', [id, balance]);
      return id;
    };
    const row = async (id: string): Promise<Record<string, unknown>> =>
      (await pool.query('SELECT balance::text AS balance, fence::text AS fence, note FROM orm_accounts WHERE id = $1', [id])).rows[0];
    /** `work` in a transaction of a connection of our own (not the ORM's), rolled back after. */
    const elsewhere = async <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        return await work(client);
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    const pid = async (db: PgQueryable): Promise<number> => Number((await db.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);

    it("holds the key in the ORM's transaction (a lease and another transaction are busy) and releases it at commit", async () => {
      const key = uniqueKey('orm-commit');
      const token = await orm.transaction(async (db) => {
        const held = await txLock.acquire(db, key);
        expect(await app.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
        expect(await refusal(() => elsewhere((client) => txLock.acquire(client, key)))).toBeInstanceOf(LockBusyError);
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
        expect(await elsewhere((client) => txLock.acquire(client, key)).catch((e: unknown) => e)).toBeInstanceOf(LockBusyError);
      }, 'rollback').catch(afterRollback);
      expect(await row(id)).toEqual({ balance: '10', fence: '0', note: null });
      expect(await elsewhere((client) => txLock.acquire(client, key))).toBeGreaterThan(0n);
    });

    it("refuses a fenced write and read with a stale token, the row unchanged; the newer token's write goes through with its values as parameters", async () => {
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
      const token = await orm.transaction(async (db) => {
        const held = await txLock.acquire(db, key);
        expect(Number((await fence.read(db, id, held)).balance)).toBe(20);
        await fence.update(db, id, { balance: 30, note: NOTE, tags: ['a', NOTE] }, held); // an array is one value
        return held;
      });
      expect(await row(id)).toEqual({ balance: '30', fence: String(token), note: NOTE });
      expect((await pool.query('SELECT tags FROM orm_accounts WHERE id = $1', [id])).rows[0].tags).toEqual(['a', NOTE]);
    });

    it('leaves nothing on the pooled connection: after a commit, a busy answer and a rollback, the next transaction on it takes the key', async () => {
      const key = uniqueKey('orm-recycled');
      const other = uniqueKey('orm-recycled-busy');
      const first = await orm.transaction(async (db) => {
        await txLock.acquire(db, key);
        return pid(db);
      });
      const holder = await pool.connect();
      try {
        await holder.query('BEGIN');
        await txLock.acquire(holder, other);
        const second = await orm.transaction(async (db) => {
          expect(await refusal(() => txLock.acquire(db, other))).toBeInstanceOf(LockBusyError); // the transaction goes on
          await txLock.acquire(db, key);
          return pid(db);
        }, 'rollback').catch(afterRollback<number>);
        expect(second).toBe(first);
      } finally {
        await holder.query('ROLLBACK');
        holder.release();
      }
      const session = await pool.query("SELECT state, (SELECT count(*)::int FROM pg_locks WHERE pid = $1 AND locktype = 'advisory') AS advisory FROM pg_stat_activity WHERE pid = $1", [first]);
      expect(session.rows[0]).toEqual({ state: 'idle', advisory: 0 });
      const third = await orm.transaction(async (db) => {
        await txLock.acquire(db, key);
        await txLock.acquire(db, other);
        expect((await db.query("SELECT current_setting('lock_timeout') AS t")).rows[0].t).toBe('0'); // the wait's setting ended with its statement
        return pid(db);
      });
      expect(third).toBe(first);
    });

    it('refuses the handle outside a transaction; passes the ORM\'s SQL errors through unchanged; names missing functions', async () => {
      expect(await refusal(() => txLock.acquire(orm.outside(), uniqueKey('orm-outside')))).toMatchObject({ field: 'client' });
      const missing = await orm.transaction((db) => new PgFence({ table: 'no_such_table' }).read(db, 'x', 1n)).catch((e: unknown) => e);
      expect(orm.isOrmError(missing)).toBe(true);
      expect(missing).not.toBeInstanceOf(DistributedLockError);
      const noFunctions = await orm.transaction((db) => new PgTransactionLock({ tablePrefix: 'no_such' }).acquire(db, uniqueKey('orm-fn'))).catch((e: unknown) => e);
      expect(noFunctions).toMatchObject({ name: 'InvalidLockOptionsError', field: 'tablePrefix' });
    });

    describeAdaptedChecks(() => orm, 'mysql', [(wrong) => fence.read(wrong as PgQueryable, 'x', 1n), (wrong) => txLock.acquire(wrong as PgOrmClient, uniqueKey('orm-wrong'))]);
  });
}
