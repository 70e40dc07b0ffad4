import mysql from 'mysql2/promise';
import { DistributedLockError, MySqlFence, StaleFencingTokenError, type MySqlQueryable } from 'nest-distributed-lock';
import { MariaDbServer } from '../harness/mariadb.mjs';

// MySqlFence (issue 38): PgFence's rule on a real MariaDB — a lower token refused with nothing
// changed, an equal one accepted, reads raise the fence, the caller's transaction respected.

/** `db`, with another writer's `between[i]()` run after the fence's i-th statement (0: the lock, 1: the write). */
function interleaved(db: mysql.Pool, between: Record<number, () => Promise<unknown>>): MySqlQueryable {
  let n = 0;
  return {
    query: async (sql: string, values?: unknown[]) => {
      const result = await db.query(sql, values);
      await between[n++]?.();
      return result as [unknown, unknown];
    },
  };
}
describe("MySqlFence: the SQL guard, in the caller's transaction, on a real MariaDB", () => {
  let server: MariaDbServer;
  let pool: mysql.Pool;
  const fence = new MySqlFence({ table: 'fenced.accounts' });

  beforeAll(async () => {
    server = await MariaDbServer.start();
    pool = mysql.createPool({ uri: server.url, connectionLimit: 4 });
    await pool.query('CREATE DATABASE fenced');
    await pool.query('CREATE TABLE fenced.accounts (id VARCHAR(64) NOT NULL PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB');
    await pool.query('CREATE TABLE fenced.loose (id VARCHAR(64) NOT NULL, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB');
  }, 120_000);

  afterAll(async () => {
    await pool?.end();
    await server?.stop();
  }, 30_000);

  const row = async (id: string): Promise<{ balance: string; fence: string }> => {
    const [rows] = await pool.query<mysql.RowDataPacket[]>('SELECT CAST(balance AS CHAR) AS balance, CAST(fence AS CHAR) AS fence FROM fenced.accounts WHERE id = ?', [id]);
    return rows[0] as { balance: string; fence: string };
  };

  it('after an update with token 34, one with 33 throws and changes nothing', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('a', 100)");
    const updated = await fence.update(pool, 'a', { balance: 150 }, 34n);
    expect(Number(updated.balance)).toBe(150);
    expect(Object.keys(updated)).toEqual(['id', 'balance', 'fence']);
    const late = fence.update(pool, 'a', { balance: 999 }, 33n);
    await expect(late).rejects.toBeInstanceOf(StaleFencingTokenError);
    await expect(late).rejects.toMatchObject({ token: 33n });
    expect(await row('a')).toEqual({ balance: '150', fence: '34' });
  });

  it('accepts an equal token, also when nothing changes — with and without FOUND_ROWS', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance, fence) VALUES ('eq', 7, 9)");
    const noFoundRows = await mysql.createConnection({ uri: server.url, flags: ['-FOUND_ROWS'] });
    try {
      for (const db of [pool, noFoundRows]) {
        await expect(fence.update(db, 'eq', { balance: 7 }, 9n)).resolves.toMatchObject({ id: 'eq' }); // same values: 0 rows changed
        await expect(fence.read(db, 'eq', 9n)).resolves.toMatchObject({ id: 'eq' });
        await expect(fence.update(db, 'eq', { balance: 7 }, 8n)).rejects.toBeInstanceOf(StaleFencingTokenError);
      }
    } finally {
      await noFoundRows.end();
    }
    expect(await row('eq')).toEqual({ balance: '7', fence: '9' });
  });

  it("runs inside the caller's transaction: a rollback undoes the write and the fence", async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance, fence) VALUES ('tx', 10, 5)");
    const conn = await pool.getConnection();
    try {
      await conn.beginTransaction();
      await fence.update(conn, 'tx', { balance: 20 }, 6n);
      await conn.rollback();
    } finally {
      conn.release();
    }
    expect(await row('tx')).toEqual({ balance: '10', fence: '5' });
  });

  it('a fenced read raises the fence: a read-modify-write by a superseded holder is refused', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('rmw', 100)");
    const a = await fence.read(pool, 'rmw', 5n); // holder A reads with 5 …
    await fence.read(pool, 'rmw', 6n); // … B takes over and reads with 6
    await expect(fence.update(pool, 'rmw', { balance: Number(a.balance) + 1 }, 5n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    expect(await row('rmw')).toEqual({ balance: '100', fence: '6' });
  });

  it("holds the row for the caller's transaction: a newer holder waits, then the older one's late write is refused", async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('race', 0)");
    const older = await pool.getConnection();
    const newer = await pool.getConnection();
    try {
      await older.beginTransaction();
      await fence.read(older, 'race', 10n); // the row is locked until older commits
      await newer.beginTransaction();
      let newerDone = false;
      const newerWrite = fence.update(newer, 'race', { balance: 2 }, 11n).then((r) => ((newerDone = true), r));
      await new Promise((r) => setTimeout(r, 300));
      expect(newerDone).toBe(false); // waits on the row lock
      await fence.update(older, 'race', { balance: 1 }, 10n);
      await older.commit();
      await newerWrite;
      await newer.commit();
      await expect(fence.update(pool, 'race', { balance: 3 }, 10n)).rejects.toBeInstanceOf(StaleFencingTokenError);
    } finally {
      older.release();
      newer.release();
    }
    expect(await row('race')).toEqual({ balance: '2', fence: '11' });
  });

  it('compares tokens above 2^53 exactly, and says so when the row does not exist or is not unique', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('big', 0)");
    const big = 2n ** 53n + 2n;
    await fence.update(pool, 'big', { balance: 1 }, big);
    await expect(fence.update(pool, 'big', { balance: 2 }, big - 1n)).rejects.toBeInstanceOf(StaleFencingTokenError); // 2^53 + 1: a double would call it equal
    expect(await row('big')).toEqual({ balance: '1', fence: big.toString() });
    await expect(fence.update(pool, 'nobody', { balance: 1 }, 1n)).rejects.toThrow(/no row with id = nobody/);
    await pool.query("INSERT INTO fenced.loose (id, balance) VALUES ('twice', 1), ('twice', 2)");
    const loose = new MySqlFence({ table: 'fenced.loose' });
    await expect(loose.update(pool, 'twice', { balance: 9 }, 1n)).rejects.toThrow(/several rows .* nothing was changed/);
    const [rows] = await pool.query<mysql.RowDataPacket[]>("SELECT balance, fence FROM fenced.loose WHERE id = 'twice' ORDER BY balance");
    expect(rows.map((r) => [Number(r.balance), Number(r.fence)])).toEqual([
      [1, 0],
      [2, 0],
    ]);
    await expect(fence.update(pool, 'big', { balance: 1 }, 2n ** 63n)).rejects.toThrow(/signed BIGINT/);
  });

  it('quotes identifiers: a hostile column name is a column name, not SQL', async () => {
    const hostile = 'note`; DROP TABLE fenced.accounts; --';
    await pool.query(`CREATE TABLE fenced.odd (id INT PRIMARY KEY, \`${hostile.replace(/`/g, '``')}\` TEXT, fence BIGINT NOT NULL DEFAULT 0)`);
    await pool.query('INSERT INTO fenced.odd (id) VALUES (1)');
    const odd = new MySqlFence({ table: 'fenced.odd' });
    const updated = await odd.update(pool, 1, { [hostile]: 'hello' }, 1n);
    expect(updated[hostile]).toBe('hello');
    await expect(row('a')).resolves.toBeDefined(); // fenced.accounts is still there
    expect(() => new MySqlFence({ table: '' })).toThrow(/table/);
    await expect(odd.update(pool, 1, { fence: 5 }, 2n)).rejects.toThrow(/must not set the fence column/);
  });

  // An adversarial review's cases (each failed on a682d3b, the first version).
  it('never reports a refused write as applied: the row removed between the lock and the write, then put back', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('gone', 100)");
    const db = interleaved(pool, {
      0: () => pool.query("DELETE FROM fenced.accounts WHERE id = 'gone'"),
      1: () => pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('gone', 100)"),
    });
    await expect(fence.update(db, 'gone', { balance: 42 }, 5n)).rejects.toThrow(/replaced or removed .* nothing was written/);
    expect(await row('gone')).toEqual({ balance: '100', fence: '0' });
  });

  it('says the rows were written when a duplicate id appears between the lock and the write', async () => {
    await pool.query("INSERT INTO fenced.loose (id, balance) VALUES ('dup', 1)");
    const loose = new MySqlFence({ table: 'fenced.loose' });
    const db = interleaved(pool, { 0: () => pool.query("INSERT INTO fenced.loose (id, balance) VALUES ('dup', 2)") });
    await expect(loose.update(db, 'dup', { balance: 9 }, 3n)).rejects.toThrow(/2 rows have id = dup and were written/);
  });

  it('returns the latest row in REPEATABLE READ, not the transaction\'s snapshot', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('rr', 100)");
    const a = await pool.getConnection();
    try {
      await a.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
      await a.beginTransaction();
      await a.query("SELECT * FROM fenced.accounts WHERE id = 'rr'"); // fixes A's snapshot
      await fence.update(pool, 'rr', { balance: 50 }, 7n); // the same holder, from another connection
      const seen = await fence.read(a, 'rr', 7n);
      expect(Number(seen.balance)).toBe(50);
      await a.commit();
    } finally {
      a.release();
    }
  });

  it('returns the fence exactly (as text), refuses a fence column that cannot hold the token, and plain values only', async () => {
    await pool.query("INSERT INTO fenced.accounts (id, balance) VALUES ('max', 0)");
    const max = 2n ** 63n - 1n;
    expect((await fence.update(pool, 'max', { balance: 1 }, max)).fence).toBe(max.toString());
    await pool.query('CREATE TABLE fenced.narrow (id INT PRIMARY KEY, v INT, fence INT NOT NULL DEFAULT 0)');
    await pool.query('INSERT INTO fenced.narrow (id, v) VALUES (1, 0)');
    const lax = await mysql.createConnection({ uri: server.url });
    try {
      await lax.query("SET SESSION sql_mode = ''"); // clamps 5e9 to 2147483647 instead of failing
      await expect(new MySqlFence({ table: 'fenced.narrow' }).update(lax, 1, { v: 1 }, 5_000_000_000n)).rejects.toThrow(/must be a BIGINT/);
    } finally {
      await lax.end();
    }
    await expect(fence.update(pool, 'max', { ID: 'other' }, max)).rejects.toThrow(/must not set the id column/);
    await expect(fence.update(pool, 'max', { FENCE: 0 }, max)).rejects.toThrow(/must not set the fence column/);
    await expect(fence.update(pool, 'max', { balance: { a: 1 } }, max)).rejects.toThrow(/values.balance/);
    await expect(fence.update(pool, 'max', { balance: NaN }, max)).rejects.toThrow(/values.balance/);
    await expect(fence.update(pool, { id: 'max' }, { balance: 2 }, max)).rejects.toThrow(/id/);
    await expect(fence.read(pool, ['max'], max)).rejects.toThrow(/an array/);
    expect(await row('max')).toEqual({ balance: '1', fence: max.toString() });
  });
});
