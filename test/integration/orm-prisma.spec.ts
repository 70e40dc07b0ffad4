import { PrismaMariaDb } from '@prisma/adapter-mariadb';
import { PrismaPg } from '@prisma/adapter-pg';
import { fromPrisma, type SqlDialect } from 'nest-distributed-lock/orm';
import { endWith, type OrmUnderTest } from '../harness/orm-contract.js';
import { describeOrmOnMySql } from '../harness/orm-mysql-contract.js';
import { describeOrmOnPostgres } from '../harness/orm-postgres-contract.js';
import { generatedPrismaClient, type GeneratedPrismaClient, type PrismaTx } from '../harness/prisma-client.js';

// fromPrisma (issue 38) against Prisma 7's generated client and its driver adapters (pg, mariadb),
// on real servers: the contract of test/harness/orm-contract.ts.

/** Prisma's errors: `PrismaClientKnownRequestError` and its kin (a `clientVersion` on each). */
const isPrismaError = (error: unknown): boolean => error instanceof Error && /^PrismaClient\w*Error$/.test(error.name) && 'clientVersion' in error;

function prismaUnderTest<D extends SqlDialect>(prisma: GeneratedPrismaClient, dialect: D): OrmUnderTest<ReturnType<typeof fromPrisma<D>>> {
  return {
    transaction: (work, end) => prisma.$transaction((tx) => endWith(end, () => work(fromPrisma(tx, dialect), tx)), { timeout: 30_000, maxWait: 10_000 }),
    outside: () => fromPrisma(prisma, dialect),
    adapt: (handle, other) => fromPrisma(handle as PrismaTx, other),
    isOrmError: isPrismaError,
    close: () => prisma.$disconnect(),
  };
}

describeOrmOnPostgres('Prisma 7 (@prisma/adapter-pg)', async (server) => {
  const PrismaClient = await generatedPrismaClient('postgresql');
  return prismaUnderTest(new PrismaClient({ adapter: new PrismaPg({ connectionString: server.url, max: 1 }) }), 'postgres');
});

describeOrmOnMySql('Prisma 7 (@prisma/adapter-mariadb)', async (server) => {
  const PrismaClient = await generatedPrismaClient('mysql');
  return prismaUnderTest(new PrismaClient({ adapter: new PrismaMariaDb({ host: server.host, port: server.port, user: server.user, database: server.database, connectionLimit: 1 }) }), 'mysql');
});
