// `node .tmp/compiled/bench/pg-durability.js` (after `npm run bench` or `npm test` compiled it):
// what the PostgreSQL backend's lease table costs, and what the usual knobs would buy, measured
// outside lib/ on the bench's own database. Variants, each against the advisory-lock floor in the
// same round: the harness's server (fsync=off) with the tables as the backend creates them; the
// same with the lease and queue tables UNLOGGED; a server with fsync=on (as in production); that
// with UNLOGGED tables; and that with synchronous_commit=off for the database.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { PostgresServer } from '../test/harness/postgres.mjs';
import { ours, pgFloor, type Implementation } from './implementations.js';

const PHASE_MS = 1_500;
const ROUNDS = 3;
const WORKERS = 16;

async function phase(impl: Implementation, hot: boolean, tag: string): Promise<{ opsPerSec: number; fairness: number }> {
  const workers = hot ? WORKERS : 1;
  const done = new Array<number>(workers).fill(0);
  let seq = 0;
  const started = performance.now();
  const deadline = started + PHASE_MS;
  await Promise.all(
    done.map(async (_, w) => {
      while (performance.now() < deadline) {
        const unlock = await impl.lock(hot ? `hot:${tag}` : `seq:${tag}:${seq++}`);
        await null;
        done[w] += 1;
        await unlock();
      }
    }),
  );
  const ops = done.reduce((a, b) => a + b, 0);
  return { opsPerSec: (ops / (performance.now() - started)) * 1000, fairness: Math.min(...done) / Math.max(...done) };
}

const median = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

async function measure(url: string, label: string): Promise<void> {
  const impls = [await pgFloor(url), await ours('postgres', url)];
  const ratios = { seq: [] as number[], hot: [] as number[] };
  const abs = { seq: [] as number[], hot: [] as number[], fair: [] as number[] };
  for (let round = 0; round <= ROUNDS; round++) {
    for (const hot of [false, true]) {
      const order = round % 2 ? impls : [...impls].reverse();
      const r = new Map<string, { opsPerSec: number; fairness: number }>();
      for (const impl of order) r.set(impl.name, await phase(impl, hot, `${label}.${round}.${impl.name}`));
      if (round === 0) continue;
      const [floor, service] = impls.map((i) => r.get(i.name)!);
      (hot ? ratios.hot : ratios.seq).push(service.opsPerSec / floor.opsPerSec);
      (hot ? abs.hot : abs.seq).push(service.opsPerSec);
      if (hot) abs.fair.push(service.fairness);
    }
  }
  for (const impl of impls) await impl.close();
  console.log(
    `| ${label} | ${median(abs.seq).toFixed(0)} | ${median(ratios.seq).toFixed(2)} | ${median(abs.hot).toFixed(0)} | ${median(ratios.hot).toFixed(2)} | ${median(abs.fair).toFixed(2)} |`,
  );
}

async function sql(url: string, ...statements: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const statement of statements) await client.query(statement);
  } finally {
    await client.end();
  }
}

const UNLOGGED = ['ALTER TABLE nest_lock_queue SET UNLOGGED', 'ALTER TABLE nest_lock_held SET UNLOGGED'];
const LOGGED = ['ALTER TABLE nest_lock_held SET LOGGED', 'ALTER TABLE nest_lock_queue SET LOGGED'];

/** The harness starts PostgreSQL with fsync=off; this relaunches its data directory with fsync=on. */
async function relaunchDurable(server: PostgresServer): Promise<() => Promise<void>> {
  await server.halt('SIGINT');
  const root = '/usr/lib/postgresql';
  const version = existsSync(root) ? readdirSync(root).sort().reverse()[0] : undefined;
  if (!version) throw new Error('PostgreSQL binaries not found under /usr/lib/postgresql');
  const id = (flag: string): number => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const owner = process.getuid?.() === 0 ? { uid: id('-u'), gid: id('-g') } : {};
  const dir = (server as unknown as { dir: string }).dir;
  const child = spawn(path.join(root, version, 'bin', 'postgres'), ['-D', path.join(dir, 'data'), '-p', String(server.port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=on', '-c', 'max_connections=50'], {
    ...owner,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const deadline = Date.now() + 20_000;
  while (!stderr.includes('ready to accept connections')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`postgres (fsync=on) did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGINT');
    await exited;
  };
}

async function main(): Promise<void> {
  const server = await PostgresServer.start();
  let stopDurable: (() => Promise<void>) | undefined;
  try {
    console.log('| server, lease tables | service seq ops/s | × floor | service hot ops/s | × floor | fairness |\n|---|---|---|---|---|---|');
    await measure(server.url, 'fsync=off, logged (as tests and bench run)');
    await sql(server.url, ...UNLOGGED);
    await measure(server.url, 'fsync=off, UNLOGGED');
    await sql(server.url, ...LOGGED);
    stopDurable = await relaunchDurable(server);
    await measure(server.url, 'fsync=on, logged (production)');
    await sql(server.url, ...UNLOGGED);
    await measure(server.url, 'fsync=on, UNLOGGED');
    await sql(server.url, ...LOGGED, 'ALTER DATABASE postgres SET synchronous_commit = off');
    await measure(server.url, 'fsync=on, synchronous_commit=off');
  } finally {
    await stopDurable?.();
    await server.stop();
  }
}

void main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
