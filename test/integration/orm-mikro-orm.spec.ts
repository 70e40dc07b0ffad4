import { EntitySchema } from '@mikro-orm/core';
import { MikroORM as MikroOrmMySql, type EntityManager as MySqlEntityManager } from '@mikro-orm/mysql';
import { MikroORM as MikroOrmPg, type EntityManager as PgEntityManager } from '@mikro-orm/postgresql';
import pg from 'pg';
import { fromMikroOrm } from 'nest-distributed-lock/orm';
import { endWith } from '../harness/orm-contract.js';
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

describeOrmOnPostgres('MikroORM 6 (@mikro-orm/postgresql)', async (server) => {
  const orm = await MikroOrmPg.init({ clientUrl: server.url, entities: [Account], pool: { min: 0, max: 1 } });
  return {
    transaction: (work, end) => orm.em.fork().transactional((em) => endWith(end, () => work(fromMikroOrm(em, 'postgres'), em))),
    outside: () => fromMikroOrm(orm.em.fork(), 'postgres'),
    adapt: (handle, dialect) => fromMikroOrm(handle as PgEntityManager, dialect),
    isOrmError: isDriverError,
    close: () => orm.close(true),
  };
});

describeOrmOnMySql('MikroORM 6 (@mikro-orm/mysql)', async (server) => {
  const orm = await MikroOrmMySql.init({ clientUrl: server.url, entities: [Account], pool: { min: 0, max: 1 } });
  return {
    transaction: (work, end) => orm.em.fork().transactional((em) => endWith(end, () => work(fromMikroOrm(em, 'mysql'), em))),
    outside: () => fromMikroOrm(orm.em.fork(), 'mysql'),
    adapt: (handle, dialect) => fromMikroOrm(handle as MySqlEntityManager, dialect),
    isOrmError: isDriverError,
    close: () => orm.close(true),
  };
});
