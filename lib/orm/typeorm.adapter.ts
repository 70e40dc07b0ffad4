import type { SqlDialect } from '../common/sql-dialect.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { checkDialect, ormClient, type OrmAnswer, type OrmClientOf } from './orm-client.js';

/** A TypeORM `DataSource`, structurally: its `type` and a way to a connection. */
export interface TypeOrmDataSourceLike {
  readonly options: { readonly type: string };
  createQueryRunner(): TypeOrmQueryRunnerLike;
}

/** A TypeORM `QueryRunner` (one connection), structurally. */
export interface TypeOrmQueryRunnerLike {
  query(query: string, parameters?: unknown[], useStructuredResult?: boolean): Promise<unknown>;
  readonly isTransactionActive: boolean;
  release(): Promise<void>;
  /** TypeORM 1. */
  readonly dataSource?: TypeOrmDataSourceLike;
  /** TypeORM 0.3. */
  readonly connection?: TypeOrmDataSourceLike;
}

/** A TypeORM `EntityManager`: the transaction's (`manager.transaction(async (em) => …)`) has a query runner. */
export interface TypeOrmEntityManagerLike {
  readonly queryRunner?: TypeOrmQueryRunnerLike;
  readonly dataSource?: TypeOrmDataSourceLike;
  readonly connection?: TypeOrmDataSourceLike;
}

/** TypeORM's `type`s each dialect covers. */
const TYPES: Record<string, SqlDialect> = { postgres: 'postgres', 'aurora-postgres': 'postgres', mysql: 'mysql', mariadb: 'mysql', 'aurora-mysql': 'mysql' };

/** TypeORM's `QueryResult` (`query(sql, values, true)`). */
interface StructuredResult {
  records?: unknown;
  raw?: unknown;
  affected?: number | null;
}

/**
 * A TypeORM `QueryRunner` or `EntityManager` as the client of `PgTransactionLock`, `PgFence`
 * (`'postgres'`) or `MySqlFence` (`'mysql'`). The dialect is checked against the data source's
 * `type` (`postgres`, `mysql`, `mariadb`, …): a mismatch is refused before any statement.
 *
 * - Statements go through the query runner's `query(sql, values, true)` with the dialect's own
 *   placeholders: on the transaction's connection for a query runner or a transaction's entity
 *   manager; a plain entity manager takes a query runner per statement and releases it.
 * - Transaction status: the query runner's `isTransactionActive` (`'T'` or `'I'`, also after its
 *   commit or rollback); `'I'` for an entity manager outside a transaction.
 * - MySQL: the header is mysql2's, `info` ("Rows matched") included.
 * - TypeORM's errors (`QueryFailedError`, with the driver's `code`) pass through unchanged.
 *
 * @example
 * await dataSource.transaction(async (manager) => {
 *   const db = fromTypeOrm(manager, 'postgres');
 *   const token = await txLock.acquire(db, `wallet:${id}`);
 *   await wallets.update(db, id, { balance }, token);
 * });
 */
export function fromTypeOrm<D extends SqlDialect>(handle: TypeOrmQueryRunnerLike | TypeOrmEntityManagerLike, dialect: D): OrmClientOf[D] {
  const where = 'fromTypeOrm()';
  checkDialect(dialect, where);
  const isRunner = typeof handle === 'object' && handle !== null && 'isTransactionActive' in handle;
  const runner = isRunner ? (handle as TypeOrmQueryRunnerLike) : (handle as TypeOrmEntityManagerLike | undefined)?.queryRunner;
  const source = runner?.dataSource ?? runner?.connection ?? (handle as TypeOrmEntityManagerLike | undefined)?.dataSource ?? (handle as TypeOrmEntityManagerLike | undefined)?.connection;
  if (typeof source?.options?.type !== 'string') {
    throw new InvalidLockOptionsError('handle', 'must be a TypeORM QueryRunner or EntityManager (with its DataSource)', where);
  }
  const type = source.options.type;
  if (TYPES[type] !== dialect) {
    throw new InvalidLockOptionsError('dialect', `is '${dialect}', and the DataSource's type is '${type}'${TYPES[type] ? `: use '${TYPES[type]}'` : ': the adapters serve postgres, mysql and mariadb'}`, where);
  }
  return ormClient(dialect, {
    status: () => (runner?.isTransactionActive ? 'T' : 'I'),
    driverError: (error) => (error as { driverError?: unknown } | undefined)?.driverError,
    async run(text, values): Promise<OrmAnswer> {
      const own = runner ?? source.createQueryRunner();
      try {
        const result = (await own.query(text, values, true)) as StructuredResult;
        if (dialect === 'postgres') {
          return { rows: Array.isArray(result.records) ? result.records : [], affectedRows: result.affected ?? undefined };
        }
        return Array.isArray(result.raw) ? { rows: result.raw } : { header: result.raw };
      } finally {
        if (own !== runner) await own.release();
      }
    },
  });
}
