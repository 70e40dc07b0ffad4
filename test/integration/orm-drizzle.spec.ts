import mysql from 'mysql2/promise';
import pg from 'pg';
import { DrizzleQueryError } from 'drizzle-orm';
import { drizzle as drizzleMySql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { fromDrizzle, type DrizzleLike, type OrmClientOf, type SqlDialect } from 'nest-distributed-lock/orm';
import { endWith, type OrmUnderTest } from '../harness/orm-contract.js';
import { describeOrmOnMySql } from '../harness/orm-mysql-contract.js';
import { describeOrmOnPostgres } from '../harness/orm-postgres-contract.js';

// fromDrizzle (issue 38) against drizzle-orm 0.45 (node-postgres and mysql2 drivers) on real
// servers: the contract of test/harness/orm-contract.ts, with `db.transaction(async (tx) => …)`.

/** Either driver's database: what the contract calls on it. */
interface DrizzleDb extends DrizzleLike {
  transaction<T>(work: (tx: DrizzleLike) => Promise<T>): Promise<T>;
}

/** `db.transaction(async (tx) => …)` on `dialect`; `close` ends the driver's pool. */
function drizzleUnderTest<D extends SqlDialect>(db: DrizzleDb, dialect: D, close: () => Promise<void>): OrmUnderTest<OrmClientOf[D]> {
  return {
    transaction: (work, end) => db.transaction((tx) => endWith(end, () => work(fromDrizzle(tx, dialect), tx))),
    outside: () => fromDrizzle(db, dialect),
    adapt: (handle, other) => fromDrizzle(handle as DrizzleLike, other),
    isOrmError: (error) => error instanceof DrizzleQueryError,
    close,
  };
}

describeOrmOnPostgres('Drizzle 0.45 (node-postgres)', async (server) => {
  const pool = new pg.Pool({ connectionString: server.url, max: 1 });
  return drizzleUnderTest(drizzlePg({ client: pool }), 'postgres', () => pool.end());
});

describeOrmOnMySql('Drizzle 0.45 (mysql2)', async (server) => {
  const pool = mysql.createPool({ uri: server.url, connectionLimit: 1 });
  return drizzleUnderTest(drizzleMySql({ client: pool }), 'mysql', () => pool.end());
});
