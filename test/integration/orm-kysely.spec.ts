import { createPool } from 'mysql2';
import pg from 'pg';
import { CamelCasePlugin, Kysely, MysqlDialect, PostgresDialect, type ControlledTransaction, type Transaction } from 'kysely';
import { fromKysely } from 'nest-distributed-lock/orm';
import { endWith } from '../harness/orm-contract.js';
import { describeOrmOnMySql } from '../harness/orm-mysql-contract.js';
import { describeOrmOnPostgres } from '../harness/orm-postgres-contract.js';

// fromKysely (issue 38) against Kysely 0.28 on real servers: the contract of
// test/harness/orm-contract.ts — `db.transaction().execute()` on PostgreSQL and a
// ControlledTransaction (`db.startTransaction()`) on MariaDB, each with a CamelCasePlugin that would
// rename the columns the lock and the fence read back (`holder_ms`, MySqlFence's fence column).

/** Kysely passes the driver's errors through: pg's DatabaseError, mysql2's error (with its errno). */
const isDriverError = (error: unknown): boolean => error instanceof pg.DatabaseError || (error instanceof Error && typeof (error as { errno?: unknown }).errno === 'number' && 'sqlMessage' in error);

describeOrmOnPostgres('Kysely 0.28 (db.transaction().execute, CamelCasePlugin)', async (server) => {
  const db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: server.url, max: 1 }) }), plugins: [new CamelCasePlugin()] });
  return {
    transaction: (work, end) => db.transaction().execute((trx) => endWith(end, () => work(fromKysely(trx, 'postgres'), trx))),
    outside: () => fromKysely(db, 'postgres'),
    adapt: (handle, dialect) => fromKysely(handle as Transaction<Record<string, never>>, dialect),
    isOrmError: isDriverError,
    close: () => db.destroy(),
  };
});

describeOrmOnMySql('Kysely 0.28 (ControlledTransaction, CamelCasePlugin)', async (server) => {
  const db = new Kysely<Record<string, never>>({ dialect: new MysqlDialect({ pool: createPool({ uri: server.url, connectionLimit: 1 }) }), plugins: [new CamelCasePlugin()] });
  return {
    async transaction(work, end) {
      const trx = await db.startTransaction().execute();
      try {
        const result = await work(fromKysely(trx, 'mysql'), trx);
        await (end === 'rollback' ? trx.rollback() : trx.commit()).execute();
        expect(fromKysely(trx, 'mysql').getTransactionStatus()).toBe('I'); // committed or rolled back
        return result;
      } catch (error) {
        if (!trx.isCommitted && !trx.isRolledBack) await trx.rollback().execute();
        throw error;
      }
    },
    outside: () => fromKysely(db, 'mysql'),
    adapt: (handle, dialect) => fromKysely(handle as ControlledTransaction<Record<string, never>>, dialect),
    isOrmError: isDriverError,
    close: () => db.destroy(),
  };
});
