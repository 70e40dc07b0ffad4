import mysql from 'mysql2/promise';
import { MariaDbServer } from '../harness/mariadb.mjs';

// The MariaDB the suite starts for itself (issue 38): its own port, not the machine's 3306; a
// committed row survives kill -9 and a restart; a paused server stops answering and answers again.
describe('the test harness MariaDB', () => {
  let server: MariaDbServer;

  beforeAll(async () => {
    server = await MariaDbServer.start();
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
  }, 30_000);

  const connect = (): Promise<mysql.Connection> => mysql.createConnection({ uri: server.url, connectTimeout: 5_000 });

  it('runs on a port of its own and speaks as MariaDB 10.x', async () => {
    expect(server.port).not.toBe(3306);
    const conn = await connect();
    try {
      const [rows] = await conn.query<mysql.RowDataPacket[]>('SELECT VERSION() AS v, @@port AS port');
      expect(String(rows[0].v)).toMatch(/MariaDB/);
      expect(Number(rows[0].port)).toBe(server.port);
    } finally {
      await conn.end();
    }
  });

  it('keeps a committed row across kill -9 and a restart', async () => {
    const before = await connect();
    await before.query('CREATE DATABASE IF NOT EXISTS harness');
    await before.query('CREATE TABLE IF NOT EXISTS harness.t (k VARCHAR(64) PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB');
    await before.query("INSERT INTO harness.t VALUES ('a', 41) ON DUPLICATE KEY UPDATE n = 41");
    await before.end();
    await server.kill();
    await server.launch();
    const after = await connect();
    try {
      const [rows] = await after.query<mysql.RowDataPacket[]>("SELECT n FROM harness.t WHERE k = 'a'");
      expect(rows.map((r) => Number(r.n))).toEqual([41]);
    } finally {
      await after.end();
    }
  }, 90_000);

  it('stops answering while paused and answers again once resumed', async () => {
    const conn = await connect();
    try {
      await server.pause();
      const pending = conn.query('SELECT 1 AS one');
      const early = await Promise.race([pending.then(() => 'answered'), new Promise((r) => setTimeout(() => r('silent'), 500))]);
      expect(early).toBe('silent');
      server.resume();
      const [rows] = (await pending) as [mysql.RowDataPacket[], unknown];
      expect(rows[0].one).toBe(1);
    } finally {
      server.resume();
      await conn.end();
    }
  }, 30_000);
});
