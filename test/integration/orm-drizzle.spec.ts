import mysql from 'mysql2/promise';
import pg from 'pg';
import { DrizzleQueryError } from 'drizzle-orm';
import { drizzle as drizzleMySql } from 'drizzle-orm/mysql2';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { fromDrizzle, type DrizzleLike } from 'nest-distributed-lock/orm';
import { endWith } from '../harness/orm-contract.js';
import { describeOrmOnMySql } from '../harness/orm-mysql-contract.js';
import { describeOrmOnPostgres } from '../harness/orm-postgres-contract.js';

// fromDrizzle (issue 38) against drizzle-orm 0.45 (node-postgres and mysql2 drivers) on real
// servers: the contract of test/harness/orm-contract.ts, with `db.transaction(async (tx) => …)`.

describeOrmOnPostgres('Drizzle 0.45 (node-postgres)', async (server) => {
  const pool = new pg.Pool({ connectionString: server.url, max: 1 });
  const db = drizzlePg({ client: pool });
  return {
    transaction: (work, end) => db.transaction((tx) => endWith(end, () => work(fromDrizzle(tx, 'postgres'), tx))),
    outside: () => fromDrizzle(db, 'postgres'),
    adapt: (handle, dialect) => fromDrizzle(handle as DrizzleLike, dialect),
    isOrmError: (error) => error instanceof DrizzleQueryError,
    close: () => pool.end(),
  };
});

describeOrmOnMySql('Drizzle 0.45 (mysql2)', async (server) => {
  const pool = mysql.createPool({ uri: server.url, connectionLimit: 1 });
  const db = drizzleMySql({ client: pool });
  return {
    transaction: (work, end) => db.transaction((tx) => endWith(end, () => work(fromDrizzle(tx, 'mysql'), tx))),
    outside: () => fromDrizzle(db, 'mysql'),
    adapt: (handle, dialect) => fromDrizzle(handle as DrizzleLike, dialect),
    isOrmError: (error) => error instanceof DrizzleQueryError,
    close: () => pool.end(),
  };
});
