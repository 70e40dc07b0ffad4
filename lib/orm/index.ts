/**
 * `nest-distributed-lock/orm`: your ORM's transaction as the client of `PgTransactionLock`,
 * `PgFence` and `MySqlFence` — Prisma, TypeORM, Kysely, Drizzle and MikroORM, on PostgreSQL and
 * MySQL/MariaDB. Each adapter is structural: this entry loads no ORM (Drizzle's `sql` is loaded
 * from your `drizzle-orm` when its adapter sends its first statement).
 */
export { fromPrisma, type PrismaClientLike } from './prisma.adapter.js';
export { fromTypeOrm, type TypeOrmQueryRunnerLike, type TypeOrmEntityManagerLike, type TypeOrmDataSourceLike } from './typeorm.adapter.js';
export { fromKysely, type KyselyLike, type KyselyCompiledQueryLike } from './kysely.adapter.js';
export { fromDrizzle, type DrizzleLike } from './drizzle.adapter.js';
export { fromMikroOrm, type MikroOrmEntityManagerLike, type KnexLike } from './mikro-orm.adapter.js';
export type { PgOrmClient, MySqlOrmClient, OrmClientOf, OrmTransactionStatus } from './orm-client.js';
export { SQL_DIALECT, type SqlDialect } from '../common/sql-dialect.js';
