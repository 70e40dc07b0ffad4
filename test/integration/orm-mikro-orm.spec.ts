import { EntitySchema, type MikroORM } from '@mikro-orm/core';
import type { SqlEntityManager } from '@mikro-orm/postgresql';
import { MikroORM as MikroOrmMySql } from '@mikro-orm/mysql';
import { MikroORM as MikroOrmPg } from '@mikro-orm/postgresql';
import pg from 'pg';
import { fromMikroOrm, type OrmClientOf, type SqlDialect } from 'nest-distributed-lock/orm';
import { endWith, type OrmUnderTest } from '../harness/orm-contract.js';
import { describeOrmOnMySql } from '../harness/orm-mysql-contract.js';
import { describeOrmOnPostgres } from '../harness/orm-postgres-contract.js';

// fromMikroOrm (issue 38) against MikroORM 6 (@mikro-orm/postgresql, @mikro-orm/mysql) on real
// servers: the contract of test/harness/orm-contract.ts, with `em.transactional(async (em) => …)`.

const Account = new EntitySchema<{ id: string; balance: string; fence: string; note?: string }>({
  name: 'Account',
  tableName: 'orm_accounts',
  properties: { id: { type: 'string', primary: true }, balance: { type: 'bigint' }, fence: { type: 'bigint' }, note: { type: 'text', nullable: true } },
});

/** Through Knex the errors are the driver's: pg's DatabaseError, mysql2's error (with its errno). */
const isDriverError = (error: unknown): boolean => error instanceof pg.DatabaseError || (error instanceof Error && typeof (error as { errno?: unknown }).errno === 'number' && 'sqlMessage' in error);

/** A MikroORM instance's fork per transaction (`em.transactional`), on `dialect`. */
function mikroOrmUnderTest<D extends SqlDialect>(orm: MikroORM, dialect: D): OrmUnderTest<OrmClientOf[D]> {
  return {
    transaction: (work, end) => orm.em.fork().transactional((em) => endWith(end, () => work(fromMikroOrm(em as SqlEntityManager, dialect), em))),
    outside: () => fromMikroOrm(orm.em.fork() as SqlEntityManager, dialect),
    adapt: (handle, other) => fromMikroOrm(handle as SqlEntityManager, other),
    isOrmError: isDriverError,
    close: () => orm.close(true),
  };
}

describeOrmOnPostgres('MikroORM 6 (@mikro-orm/postgresql)', async (server) =>
  mikroOrmUnderTest(await MikroOrmPg.init({ clientUrl: server.url, entities: [Account], pool: { min: 0, max: 1 } }), 'postgres'),
);

describeOrmOnMySql('MikroORM 6 (@mikro-orm/mysql)', async (server) =>
  mikroOrmUnderTest(await MikroOrmMySql.init({ clientUrl: server.url, entities: [Account], pool: { min: 0, max: 1 } }), 'mysql'),
);
