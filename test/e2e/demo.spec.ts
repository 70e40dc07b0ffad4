import { spawn } from 'node:child_process';
import { closablePool } from '../harness/pg-pool.js';
import { PostgresServer } from '../harness/postgres.mjs';
import type { Lease } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey } from '../harness/lock-app.js';

/** Run `scripts/demo.mjs` with `env`; its exit code and everything it printed (`onOutput` sees it as it comes). */
async function demo(env: Record<string, string>, onOutput: (soFar: string) => void = () => undefined): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['scripts/demo.mjs'], {
    env: { ...process.env, NODE_OPTIONS: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => {
    output += d;
    onOutput(output);
  });
  child.stderr.on('data', (d) => (output += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, output };
}

/** `npm run demo` is one of the two commands of the README: it must keep working. */
describe('npm run demo', () => {
  it('exits 0 and shows the paused instance\'s late write rejected by the fence, on an etcd that other applications use too', async () => {
    // npm test's etcd is shared: other specs hold many keys on it at once (list-etcd-pages over a
    // thousand). Another application holds 150 locks taken after the leader's term began (A's pause
    // hands the term to B within its 2 s session; these come 3.5 s in): more than the board's
    // newest 100, so an unfiltered board shows none of the sample's keys (runs c46-7, c46-9).
    const crowd = await startLockApp({ etcd: { hosts: etcdHosts(), commandTimeoutMs: 10_000 } });
    const held: Lease[] = [];
    let crowding: Promise<void> | undefined;
    try {
      const { code, output } = await demo({ REDIS_URL: redisUrl(), ETCD_HOSTS: etcdHosts().join(',') }, (soFar) => {
        if (crowding || !soFar.includes('A frozen')) return;
        const base = uniqueKey('demo-crowd');
        crowding = sleep(3_500).then(async () => {
          for (let i = 0; i < 150; i += 50) {
            held.push(...(await Promise.all(Array.from({ length: 50 }, (_, j) => crowd.locks.acquire(`${base}/${i + j}`, { purpose: 'correctness', ttl: 120_000 })))));
          }
        });
      });
      await crowding;
      expect(held).toHaveLength(150);
      checkRedisEtcdDemo(code, output);
    } finally {
      await crowding?.catch(() => undefined);
      await Promise.all(held.map((lease) => lease.release().catch(() => undefined)));
      await crowd.close();
    }
  }, 120_000);
});

/** What the Redis/etcd demo must print, and its exit code. */
function checkRedisEtcdDemo(code: number | null, output: string): void {
  expect(output).toMatch(/A's write with token \d+ was REJECTED \(stale-token\)/);
  expect(output).toContain('balance 61 (expected 61');
  expect(output).toMatch(/sample:leader held on etcd, token \d+, \d+ ms left, 1 waiting/);
  expect(output).toMatch(/term \d+ on [AB]: \d+ sweep/);
    // The lock board: its URL printed, refused without the password, the leader on it.
  expect(output).toMatch(/Lock board: http:\/\/127\.0\.0\.1:\d+\/locks \(user ops, password \S+\)/);
  expect(output).toContain('without the password: 401');
  expect(output).toMatch(/etcd \(correctness\): .*sample:leader \(token \d+\), 1 waiting/);
  expect(output).toContain('All checks passed');
  expect(code).toBe(0);
}

describe('npm run demo on PostgreSQL', () => {
  it('SAMPLE_BACKEND=postgres: the correctness deposits run on PostgreSQL alone, and the frozen instance\'s PgFence write is refused', async () => {
    const server = await PostgresServer.start();
    const { pool, end } = closablePool(server);
    try {
      // Redis and etcd point at a closed port: the run must not need them.
      const { code, output } = await demo({ SAMPLE_BACKEND: 'postgres', DATABASE_URL: server.url, REDIS_URL: 'redis://127.0.0.1:1', ETCD_HOSTS: '127.0.0.1:1' });
      const held = [...output.matchAll(/held account:(\S+) on (\w+) with token (\d+)/g)];
      expect(held.map((m) => m[2])).toEqual(Array(6).fill('postgres'));
      const late = /A's write with token (\d+) was REJECTED \(stale-token\)/.exec(output);
      const byB = /B got the lock .* token (\d+) → balance 61/.exec(output);
      expect(late).not.toBeNull();
      expect(byB).not.toBeNull();
      expect(BigInt(byB![1])).toBeGreaterThan(BigInt(late![1]));
      expect(output).toContain('All checks passed');
      expect(code).toBe(0);
      // The table in PostgreSQL says the same: B's deposit survived, the fence holds B's token.
      const { rows } = await pool.query('SELECT balance, fence FROM sample_accounts WHERE id = $1', [held[0][1]]);
      expect(rows).toEqual([{ balance: '61', fence: byB![1] }]);
    } finally {
      await end();
      await server.stop();
    }
  }, 180_000);
});
