import { DataSource, QueryFailedError, type EntityManager, type QueryRunner } from 'typeorm';
import { fromTypeOrm } from 'nest-distributed-lock/orm';
import { endWith } from '../harness/orm-contract.js';
import { describeOrmOnMySql } from '../harness/orm-mysql-contract.js';
import { describeOrmOnPostgres } from '../harness/orm-postgres-contract.js';

// fromTypeOrm (issue 38) against TypeORM 1 on real servers: the contract of
// test/harness/orm-contract.ts — with the EntityManager of `dataSource.transaction()` on
// PostgreSQL, and with a QueryRunner's `startTransaction()` on MariaDB, so both handles are covered.

const started: DataSource[] = [];
afterAll(async () => {
  for (const source of started) if (source.isInitialized) await source.destroy();
});

describeOrmOnPostgres('TypeORM 1 (EntityManager of dataSource.transaction)', async (server) => {
  const source = await new DataSource({ type: 'postgres', url: server.url, poolSize: 1 }).initialize();
  started.push(source);
  return {
    transaction: (work, end) => source.transaction((manager) => endWith(end, () => work(fromTypeOrm(manager, 'postgres'), manager))),
    outside: () => fromTypeOrm(source.manager, 'postgres'),
    adapt: (handle, dialect) => fromTypeOrm(handle as EntityManager, dialect),
    isOrmError: (error) => error instanceof QueryFailedError,
    close: () => source.destroy(),
  };
});

describeOrmOnMySql('TypeORM 1 (QueryRunner.startTransaction)', async (server) => {
  const source = await new DataSource({ type: 'mariadb', url: server.url, poolSize: 1 }).initialize();
  started.push(source);
  return {
    async transaction(work, end) {
      const runner: QueryRunner = source.createQueryRunner();
      await runner.startTransaction();
      try {
        const result = await work(fromTypeOrm(runner, 'mysql'), runner);
        await (end === 'rollback' ? runner.rollbackTransaction() : runner.commitTransaction());
        return result;
      } catch (error) {
        if (runner.isTransactionActive) await runner.rollbackTransaction();
        throw error;
      } finally {
        await runner.release();
      }
    },
    outside: () => fromTypeOrm(source.manager, 'mysql'),
    adapt: (handle, dialect) => fromTypeOrm(handle as QueryRunner, dialect),
    isOrmError: (error) => error instanceof QueryFailedError,
    close: () => source.destroy(),
  };
});
