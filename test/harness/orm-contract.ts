import { InvalidLockOptionsError } from 'nest-distributed-lock';
import type { SqlDialect } from 'nest-distributed-lock/orm';

// The contract every ORM adapter meets, against the real ORM and a real server (issue 38): the
// lock is held by the ORM's transaction, released at commit and at rollback, a fenced write with a
// stale token is refused with the row unchanged, and nothing is left on the pooled connection the
// transaction ran on (the ORM's pool has one connection, so every transaction reuses it).

/** One ORM, set up by its spec on the server the contract started, with a pool of one connection. */
export interface OrmUnderTest<Client> {
  /** Run `work` in one of the ORM's transactions on the adapted handle; commit, or roll back when asked (or when `work` throws). */
  transaction<T>(work: (db: Client, handle: unknown) => Promise<T>, end?: 'commit' | 'rollback'): Promise<T>;
  /** The ORM's handle outside any transaction, adapted. */
  outside(): Client;
  /** `handle` (as `transaction` gave it) adapted for `dialect`: the other dialect's client, or the adapter's refusal. */
  adapt(handle: unknown, dialect: SqlDialect): unknown;
  /** Whether `error` is the ORM's own error for a statement the server refused. */
  isOrmError(error: unknown): boolean;
  close(): Promise<void>;
}

/** What `endWith('rollback', …)` throws inside the ORM's transaction to roll it back; `afterRollback` takes it back. */
const ROLLBACK = Symbol('roll back');

/** `work`, then a throw that rolls the ORM's transaction back when `end` asks for it. */
export function endWith<T>(end: 'commit' | 'rollback' | undefined, work: () => Promise<T>): Promise<T> {
  return work().then((result) => {
    if (end === 'rollback') throw Object.assign(new Error('roll back'), { [ROLLBACK]: result });
    return result;
  });
}

/** The result `work` gave before `endWith` rolled back, else the error. */
export function afterRollback<T>(error: unknown): T {
  if (error instanceof Error && ROLLBACK in error) return (error as unknown as Record<symbol, T>)[ROLLBACK];
  throw error;
}

/** A value that breaks naive placeholder handling: quotes, a `?`, a `$1`, a backslash. */
export const NOTE = `it's a ? and $1, "quoted" \\ done`;

/** The rejection of `call` (sync or async). */
export const refusal = async (call: () => unknown): Promise<unknown> => {
  try {
    await call();
  } catch (error) {
    return error;
  }
  throw new Error('expected a refusal, the call went through');
};

/**
 * The adapter's status, and a handle adapted for the other dialect refused with
 * `InvalidLockOptionsError` by each consumer in `refusers` (or by the adapter itself, which may know
 * the handle's dialect) — before any statement.
 */
export function describeAdaptedChecks<Client extends { getTransactionStatus(): string | null }>(
  orm: () => OrmUnderTest<Client>,
  other: SqlDialect,
  refusers: Array<(wrong: unknown) => unknown>,
): void {
  it("tells it runs in a transaction ('T') and outside ('I'); a handle adapted for the other dialect is refused before any statement", async () => {
    expect(orm().outside().getTransactionStatus()).toBe('I');
    await orm().transaction(async (db, handle) => {
      expect(db.getTransactionStatus()).toBe('T');
      for (const refuser of refusers) expect(await refusal(() => refuser(orm().adapt(handle, other)))).toBeInstanceOf(InvalidLockOptionsError);
      expect(db.getTransactionStatus()).toBe('T');
    });
  });
}
