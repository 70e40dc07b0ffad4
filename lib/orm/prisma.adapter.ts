import type { SqlDialect } from '../common/sql-dialect.js';
import { checkDialect, checkHandle, ormClient, type OrmClientOf, type OrmTransactionStatus } from './orm-client.js';
import { returnsRows } from './sql-statement.js';

/**
 * The parts of a Prisma client this adapter calls, structurally: the transaction client of
 * `prisma.$transaction(async (tx) => …)` (or a `PrismaClient`, outside a transaction).
 */
export interface PrismaClientLike {
  $queryRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
  $executeRawUnsafe(query: string, ...values: unknown[]): PromiseLike<unknown>;
}

/**
 * A Prisma transaction client as the client of `PgTransactionLock`, `PgFence` (`'postgres'`) or
 * `MySqlFence` (`'mysql'`) — the dialect of your schema's `datasource`.
 *
 * - Statements go through `$queryRawUnsafe` (those that answer with rows: `SELECT`, `RETURNING`)
 *   or `$executeRawUnsafe` (other writes: their count), with the dialect's own placeholders (`$1`,
 *   `?`) and the values as parameters, in the interactive transaction of `tx`.
 * - Transaction status: `'T'` for a transaction client, `'I'` for the `PrismaClient` itself, whose
 *   every statement may take another pooled connection (`PgTransactionLock` refuses it). Prisma
 *   does not say that a transaction has ended: a `tx` used after its callback fails with Prisma's
 *   own error.
 * - MySQL: Prisma reports a write's `affectedRows`, not the server's "Rows matched" text; the
 *   MariaDB adapter counts matched rows (its default `foundRows`), which is what `MySqlFence` needs.
 * - Prisma's errors pass through unchanged (`PrismaClientKnownRequestError`; the server's code is
 *   in `meta.driverAdapterError.cause`, which `driverErrorOf(error)` returns).
 *
 * @example
 * await prisma.$transaction(async (tx) => {
 *   const db = fromPrisma(tx, 'postgres');
 *   const token = await txLock.acquire(db, `wallet:${id}`);
 *   await wallets.update(db, id, { balance }, token);
 * }); // the lock ends with the transaction
 */
export function fromPrisma<D extends SqlDialect>(tx: PrismaClientLike, dialect: D): OrmClientOf[D] {
  const where = 'fromPrisma()';
  const checked = checkDialect(dialect, where);
  checkHandle(tx, '$queryRawUnsafe', 'a Prisma client or transaction client', where);
  // A transaction client lacks the client-wide methods ($connect, $disconnect, $on, $extends; Prisma 5
  // and 6 also $transaction, which Prisma 7 keeps for nested transactions).
  const status: OrmTransactionStatus = typeof (tx as { $disconnect?: unknown }).$disconnect === 'function' ? 'I' : 'T';
  return ormClient(dialect, {
    status: () => status,
    // Prisma 7 keeps the server's error, normalised by the driver adapter, under meta.driverAdapterError.cause.
    driverError: (error) => (error as { meta?: { driverAdapterError?: { cause?: unknown } } } | undefined)?.meta?.driverAdapterError?.cause,
    async run(text, values) {
      if (returnsRows(text, checked)) return { rows: (await tx.$queryRawUnsafe(text, ...values)) as Array<Record<string, unknown>> };
      return { affectedRows: Number(await tx.$executeRawUnsafe(text, ...values)) };
    },
  });
}
