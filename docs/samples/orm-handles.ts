// The ORM handles the samples of docs/guide/orm.md and the README use, made as each ORM's own docs
// make them, on PostgreSQL (compiled with the project, never run). Your application has its own.
import { MikroORM } from '@mikro-orm/postgresql';
import { PgFence, PgTransactionLock } from 'nest-distributed-lock';
import { drizzle } from 'drizzle-orm/node-postgres';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { DataSource } from 'typeorm';
import type { PrismaClientLike } from 'nest-distributed-lock/orm';

const connectionString = process.env.DATABASE_URL ?? 'postgres://app@127.0.0.1:5432/app';

/** TypeORM: `TypeOrmModule.forRoot(…)` makes it in a Nest app (`@InjectDataSource()`). */
export const dataSource = new DataSource({ type: 'postgres', url: connectionString });

/** Kysely (the database's table types in place of `any`). */
export const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString }) }) });

/** Drizzle over node-postgres. */
export const drizzleDb = drizzle({ client: new pg.Pool({ connectionString }) });

/** MikroORM 6 (`MikroOrmModule.forRoot(…)` in a Nest app; `EntityManager` injected). */
export const orm = await MikroORM.init({ clientUrl: connectionString, entities: [], discovery: { warnWhenNoEntities: false } });

/**
 * Prisma 7: `new PrismaClient({ adapter: new PrismaPg({ connectionString }) })` from the client
 * `prisma generate` wrote for your schema (declared here: this repository generates none).
 */
export declare const prisma: { $transaction<T>(work: (tx: PrismaClientLike) => Promise<T>, options?: { timeout?: number }): Promise<T> };

/** A lock your transaction holds: it needs the PostgreSQL backend's functions (`forRoot({ postgres })` created them). */
export const txLock = new PgTransactionLock();

/** `CREATE TABLE wallets (id text PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0)` */
export const wallets = new PgFence({ table: 'wallets' });
