// `npm run bench`: our lock and its peers against the raw floors, interleaved in one process.
// Every implementation has its own connection; rounds rotate the order; the first round is a
// warm-up and is not recorded; results are ratios to the floor measured in the same round, and
// the medians over runs. Not part of `npm test`: speed is measured, not asserted.
//   npm run bench                     3 runs; on Node 24 (the reference) writes docs/project/benchmarks.md + .svg, on another Node docs/project/benchmarks-node<major>.md
//   npm run bench -- --runs 1 --quick a short run (smoke)
//   npm run bench -- --soak           16 workers × 1,000 keys for 60 s, heap before/after
//   npm run bench -- --semaphore      adds a semaphore of permits 2 per backend (printed; docs/ left as they are)
//   npm run bench -- --backend postgres   one backend's rows only (redis, etcd, postgres, zookeeper, redlock, mysql; printed; docs/ left as they are)
//   npm run bench -- --phase few --only floor,semaphore,service   some phases, and the implementations whose name holds one of the words (printed only)
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import mysql from 'mysql2/promise';
import { MariaDbServer } from '../test/harness/mariadb.mjs';
import { PostgresServer } from '../test/harness/postgres.mjs';
import { EtcdCluster, RedisServer } from '../test/harness/servers.mjs';
import { ZooKeeperServer } from '../test/harness/zookeeper.mjs';
import { etcdFloor, ours, oursDecorator, oursOnClient, oursSemaphore, pgFloor, redisFloor, redlockFloor, zkFloor, type Backend, type Implementation } from './implementations.js';
import { mysqlFloor, mysqlRowFloor } from './mysql-floors.js';
import { peers, redlockPeers } from './peers.js';

type Phase = 'sequential' | 'hot' | 'few' | 'spread';
interface Sample {
  impl: string;
  backend: Backend;
  floor: boolean;
  phase: Phase;
  ops: number;
  ms: number;
  latencies: number[];
  perWorker: number[];
  maxOverlap: number;
  cpuUs: number;
  redisCalls: number;
  fsyncs: number;
  walBytes: number;
}

const args = process.argv.slice(2);
const arg = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const quick = args.includes('--quick');
const withSemaphore = args.includes('--semaphore');
const onlyBackend = args.includes('--backend') ? args[args.indexOf('--backend') + 1] : undefined;
const RUNS = arg('runs', 3);
const ROUNDS = arg('rounds', quick ? 2 : 3);
const PHASE_MS = arg('ms', quick ? 600 : 1_500);
const WORKERS = 16;
const ALL_PHASES = ['sequential', 'hot', 'few', 'spread'] as const;
const PHASES = args.includes('--phase') ? ALL_PHASES.filter((p) => args[args.indexOf('--phase') + 1].split(',').includes(p)) : ALL_PHASES;
const onlyNames = args.includes('--only') ? args[args.indexOf('--only') + 1].split(',') : undefined;
/** Where the hand-written part of docs/project/benchmarks.md starts; the script keeps it. */
const ANALYSIS_MARKER = '<!-- analysis: kept by npm run bench -->';
const KEYS = 1_000;
/** Keys of the phase with some contention (16 workers on 32 keys: about one worker in three finds its key held). */
const FEW_KEYS = 32;

const pct = (values: number[], p: number): number => {
  if (!values.length) return NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const median = (values: number[]): number => pct(values, 50);

async function redisCalls(raw: Redis): Promise<number> {
  const info = (await raw.info('commandstats')) as string;
  let total = 0;
  for (const line of info.split('\n')) {
    const m = /^cmdstat_(\w+):calls=(\d+)/.exec(line);
    if (m && m[1] !== 'info') total += Number(m[2]);
  }
  return total;
}

interface Counters {
  raw: Redis;
  etcd: EtcdCluster;
  /** A session of its own on the bench's PostgreSQL: WAL written, from the insert position. */
  pg: pg.Client;
}

async function walPosition(client: pg.Client): Promise<number> {
  const { rows } = await client.query("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8 AS b");
  return rows[0].b as number;
}

async function runPhase(impl: Implementation, phase: Phase, tag: string, counters: Counters): Promise<Sample> {
  const latencies: number[] = [];
  const workers = phase === 'sequential' ? 1 : WORKERS;
  const perWorker = new Array<number>(workers).fill(0);
  const inside = new Map<string, number>();
  let maxOverlap = 0;
  let seq = 0;
  const [calls0, fsync0, wal0] = [await redisCalls(counters.raw), await counters.etcd.metric('etcd_disk_wal_fsync_duration_seconds_count'), await walPosition(counters.pg)];
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  const deadline = started + PHASE_MS;
  await Promise.all(
    perWorker.map(async (_, w) => {
      while (performance.now() < deadline) {
        const key =
          phase === 'sequential' ? `seq:${tag}:${seq++}` : phase === 'hot' ? `hot:${tag}` : phase === 'few' ? `few:${tag}:${Math.floor(Math.random() * FEW_KEYS)}` : `spread:${tag}:${Math.floor(Math.random() * KEYS)}`;
        const asked = performance.now();
        const unlock = await impl.lock(key);
        latencies.push(performance.now() - asked);
        const n = (inside.get(key) ?? 0) + 1;
        inside.set(key, n);
        maxOverlap = Math.max(maxOverlap, n);
        await null; // the (empty) critical section yields once: another holder would show up here
        inside.set(key, (inside.get(key) ?? 1) - 1);
        perWorker[w] += 1;
        await unlock();
      }
    }),
  );
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  const [calls1, fsync1, wal1] = [await redisCalls(counters.raw), await counters.etcd.metric('etcd_disk_wal_fsync_duration_seconds_count'), await walPosition(counters.pg)];
  return {
    impl: impl.name,
    backend: impl.backend,
    floor: impl.floor ?? false,
    phase,
    ops: perWorker.reduce((a, b) => a + b, 0),
    ms,
    latencies,
    perWorker,
    maxOverlap,
    cpuUs: cpu.user + cpu.system,
    redisCalls: calls1 - calls0,
    fsyncs: fsync1 - fsync0,
    walBytes: wal1 - wal0,
  };
}

interface Row {
  impl: string;
  backend: string;
  phase: Phase;
  opsPerSec: number;
  ratio: number;
  p50: number;
  p99: number;
  max: number;
  fairness: number;
  maxOverlap: number;
  cpuUsPerOp: number;
  redisPerOp: number;
  fsyncPerOp: number;
  walBytesPerOp: number;
}

function summarize(samples: Sample[]): Row[] {
  const rows: Row[] = [];
  const byKey = new Map<string, Sample[]>();
  for (const s of samples) byKey.set(`${s.impl}|${s.phase}`, [...(byKey.get(`${s.impl}|${s.phase}`) ?? []), s]);
  for (const list of byKey.values()) {
    const { impl, backend, phase } = list[0];
    const ops = list.reduce((a, s) => a + s.ops, 0);
    const ms = list.reduce((a, s) => a + s.ms, 0);
    // Ratio per round against the floor of the same backend and phase in that round, then the median.
    const ratios = list.map((s, i) => {
      const floor = samples.filter((f) => f.floor && f.backend === backend && f.phase === phase)[i];
      return floor ? s.ops / s.ms / (floor.ops / floor.ms) : NaN;
    });
    const latencies = list.flatMap((s) => s.latencies);
    const perWorker = list.map((s) => (s.perWorker.length > 1 ? Math.min(...s.perWorker) / Math.max(...s.perWorker) : 1));
    rows.push({
      impl,
      backend,
      phase,
      opsPerSec: (ops / ms) * 1000,
      ratio: median(ratios),
      p50: pct(latencies, 50),
      p99: pct(latencies, 99),
      max: latencies.reduce((m, v) => (v > m ? v : m), -Infinity), // no spread: a run can hold 10^5+ samples
      fairness: median(perWorker),
      maxOverlap: Math.max(...list.map((s) => s.maxOverlap)),
      cpuUsPerOp: list.reduce((a, s) => a + s.cpuUs, 0) / ops,
      redisPerOp: list.reduce((a, s) => a + s.redisCalls, 0) / ops,
      fsyncPerOp: list.reduce((a, s) => a + s.fsyncs, 0) / ops,
      walBytesPerOp: list.reduce((a, s) => a + s.walBytes, 0) / ops,
    });
  }
  return rows;
}

/** 16 workers × 1,000 keys on our Redis service for `SOAK_S` seconds; heap after GC at start and end. */
async function soak(): Promise<void> {
  const seconds = arg('seconds', 60);
  const redis = await RedisServer.start();
  const impl = await ours('redis', redis.url);
  const gc = (globalThis as { gc?: () => void }).gc;
  const heap = (): number => {
    gc?.();
    return process.memoryUsage().heapUsed;
  };
  try {
    // Warm up first so lazily created structures (subscriber, scripts) count as the baseline.
    await runPhaseFor(impl, 2_000);
    const before = heap();
    const ops = await runPhaseFor(impl, seconds * 1_000);
    const after = heap();
    const line = `soak on Node ${process.versions.node}: ${ops} critical sections in ${seconds} s (${Math.round(ops / seconds)}/s), heap ${(before / 2 ** 20).toFixed(1)} → ${(after / 2 ** 20).toFixed(1)} MiB (${(((after - before) / before) * 100).toFixed(1)} %)`;
    console.log(line);
    mkdirSync(path.resolve('docs/project'), { recursive: true });
    // One line per Node major (the reference runtime and the others reported beside it).
    const file = path.resolve('docs/project/soak.txt');
    const major = `Node ${process.versions.node.split('.')[0]}.`;
    const others = existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l.includes(' soak on Node ') && !l.includes(` soak on ${major}`)) : [];
    writeFileSync(file, [...others, `${new Date().toISOString()} ${line}`].sort((x, y) => x.slice(x.indexOf(' soak')).localeCompare(y.slice(y.indexOf(' soak')))).join('\n') + '\n');
  } finally {
    await impl.close();
    await redis.stop();
  }
}

async function runPhaseFor(impl: Implementation, ms: number): Promise<number> {
  let ops = 0;
  const deadline = performance.now() + ms;
  await Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (performance.now() < deadline) {
        const unlock = await impl.lock(`soak:${Math.floor(Math.random() * KEYS)}`);
        ops += 1;
        await unlock();
      }
    }),
  );
  return ops;
}

async function main(): Promise<void> {
  if (args.includes('--soak')) return soak();
  const [redis, etcd, postgres, zookeeper] = await Promise.all([RedisServer.start(), EtcdCluster.start({ size: 1 }), PostgresServer.start(), ZooKeeperServer.start()]);
  // Redlock's five independent masters (no persistence), only when its rows are measured.
  const masters = onlyBackend === undefined || onlyBackend === 'redlock' ? await Promise.all(Array.from({ length: 5 }, () => RedisServer.start())) : [];
  const masterUrls = masters.map((m) => m.url);
  // MariaDB (issue 38), with a database of the bench's own.
  const mariadb = onlyBackend === undefined || onlyBackend === 'mysql' ? await MariaDbServer.start() : undefined;
  const mysqlUri = mariadb ? mariadb.url.replace(/\/[^/]*$/, '/bench') : '';
  if (mariadb) {
    const admin = await mysql.createConnection({ uri: mariadb.url });
    await admin.query('CREATE DATABASE IF NOT EXISTS bench');
    await admin.end();
  }
  const raw = new Redis(redis.url);
  const pgCounter = new pg.Client({ connectionString: postgres.url });
  await pgCounter.connect();
  const pgVersion = String((await pgCounter.query('SHOW server_version')).rows[0].server_version).split(' ')[0];
  const allRuns: Row[][] = [];
  try {
    for (let run = 1; run <= RUNS; run++) {
      // Peers span Redis and etcd: made either way, then filtered like the rest.
      const makers: Array<[Backend | 'peers', () => Promise<Implementation | Implementation[]>]> = [
        ['redis', () => redisFloor(redis.url)],
        ['redis', () => ours('redis', redis.url)],
        ['redis', () => oursDecorator('redis', redis.url)],
        ['redis', () => oursOnClient('node-redis', redis.url)],
        ['redis', () => oursOnClient('iovalkey', redis.url)],
        ['peers', () => peers(redis.url, etcd.hosts)],
        ['etcd', () => etcdFloor(etcd.hosts)],
        ['etcd', () => ours('etcd', etcd.hosts)],
        ['etcd', () => oursDecorator('etcd', etcd.hosts)],
        ['postgres', () => pgFloor(postgres.url)],
        ['postgres', () => ours('postgres', postgres.url)],
        ['postgres', () => oursDecorator('postgres', postgres.url)],
        ['zookeeper', () => zkFloor(zookeeper.connectionString)],
        ['zookeeper', () => ours('zookeeper', zookeeper.connectionString)],
        ['zookeeper', () => oursDecorator('zookeeper', zookeeper.connectionString)],
        ['redlock', () => redlockFloor(masterUrls)],
        ['redlock', () => ours('redlock', masterUrls)],
        ['redlock', () => oursDecorator('redlock', masterUrls)],
        ['redlock', async () => redlockPeers(masterUrls)],
        ['mysql', () => mysqlFloor(mysqlUri)],
        ['mysql', () => mysqlRowFloor(mysqlUri)],
        ['mysql', () => ours('mysql', mysqlUri)],
        ['mysql', () => oursDecorator('mysql', mysqlUri)],
      ];
      if (withSemaphore) {
        makers.push(
          ['redis', () => oursSemaphore('redis', redis.url, 2)],
          ['etcd', () => oursSemaphore('etcd', etcd.hosts, 2)],
          ['postgres', () => oursSemaphore('postgres', postgres.url, 2)],
          ['zookeeper', () => oursSemaphore('zookeeper', zookeeper.connectionString, 2)],
        );
      }
      const impls: Implementation[] = [];
      for (const [backend, make] of makers) {
        if (onlyBackend !== undefined && backend !== onlyBackend && backend !== 'peers') continue;
        for (const impl of [await make()].flat()) {
          if ((onlyBackend === undefined || impl.backend === onlyBackend) && (onlyNames === undefined || onlyNames.some((w) => impl.name.includes(w)))) impls.push(impl);
          else await impl.close();
        }
      }
      const samples: Sample[] = [];
      for (let round = 0; round <= ROUNDS; round++) {
        for (const phase of PHASES) {
          const order = impls.map((_, i) => impls[(i + round + run) % impls.length]);
          for (const impl of order) {
            const sample = await runPhase(impl, phase, `${run}.${round}.${impl.name}`, { raw, etcd, pg: pgCounter });
            if (round > 0) samples.push(sample); // round 0 warms up
          }
        }
        process.stdout.write(`run ${run}/${RUNS} round ${round}/${ROUNDS} done\n`);
      }
      for (const impl of impls) await impl.close();
      allRuns.push(summarize(samples));
    }
  } finally {
    raw.disconnect();
    await pgCounter.end();
    await Promise.all([redis.stop(), etcd.stop(), postgres.stop(), zookeeper.stop(), ...masters.map((m) => m.stop()), mariadb?.stop()]);
  }
  // Median over runs of every figure.
  const final: Row[] = allRuns[0].map((row) => {
    const same = allRuns.map((rows) => rows.find((r) => r.impl === row.impl && r.phase === row.phase)!);
    const m = (f: (r: Row) => number): number => median(same.map(f));
    return { ...row, opsPerSec: m((r) => r.opsPerSec), ratio: m((r) => r.ratio), p50: m((r) => r.p50), p99: m((r) => r.p99), max: m((r) => r.max), fairness: m((r) => r.fairness), maxOverlap: Math.max(...same.map((r) => r.maxOverlap)), cpuUsPerOp: m((r) => r.cpuUsPerOp), redisPerOp: m((r) => r.redisPerOp), fsyncPerOp: m((r) => r.fsyncPerOp), walBytesPerOp: m((r) => r.walBytesPerOp) };
  });
  const table = render(final);
  console.log(`\n${table}`);
  if (!quick && onlyBackend === undefined && !withSemaphore && onlyNames === undefined && PHASES === ALL_PHASES) writeDocs(final, table, pgVersion);
}

function render(rows: Row[]): string {
  const f = (n: number, d = 0): string => (Number.isFinite(n) ? n.toFixed(d) : '–');
  const out: string[] = [];
  for (const phase of PHASES) {
    const title = {
      sequential: 'Sequential acquire+release pairs (distinct keys)',
      hot: `${WORKERS} workers, one key (critical sections)`,
      few: `${WORKERS} workers, ${FEW_KEYS} keys (critical sections)`,
      spread: `${WORKERS} workers, ${KEYS} keys (critical sections)`,
    }[phase];
    out.push(`### ${title}\n`);
    out.push('| implementation | ops/s | × floor | acquire/wait p50 ms | p99 ms | max ms | fairness | max overlap | client CPU µs/op | Redis cmds/op | etcd fsyncs/op | PG WAL bytes/op |');
    out.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of rows.filter((x) => x.phase === phase)) {
      out.push(`| ${r.impl} | ${f(r.opsPerSec)} | ${f(r.ratio, 2)} | ${f(r.p50, 2)} | ${f(r.p99, 2)} | ${f(r.max, 1)} | ${phase === 'sequential' ? '–' : f(r.fairness, 2)} | ${r.maxOverlap} | ${f(r.cpuUsPerOp)} | ${r.backend === 'redis' ? f(r.redisPerOp, 2) : '–'} | ${r.backend === 'etcd' ? f(r.fsyncPerOp, 2) : '–'} | ${r.backend === 'postgres' ? f(r.walBytesPerOp) : '–'} |`);
    }
    out.push('');
  }
  return out.join('\n');
}

function chart(rows: Row[]): string {
  const phases = PHASES;
  const impls = [...new Set(rows.map((r) => r.impl))];
  const barH = 14;
  const groupH = impls.length * barH + 30;
  const width = 900;
  const left = 260;
  const scale = (width - left - 60) / 2; // 0..2× floor
  const parts: string[] = [];
  phases.forEach((phase, p) => {
    const y0 = 20 + p * groupH;
    parts.push(`<text x="4" y="${y0}" font-size="13" font-weight="bold">${phase}</text>`);
    impls.forEach((impl, i) => {
      const r = rows.find((x) => x.impl === impl && x.phase === phase);
      if (!r || !Number.isFinite(r.ratio)) return;
      const y = y0 + 8 + i * barH;
      const palette = { redis: ['#c0392b', '#e8a39b'], etcd: ['#2c6fbb', '#9dbde0'], postgres: ['#2e8b57', '#9fd4b4'], zookeeper: ['#8e44ad', '#d2b4de'], redlock: ['#d35400', '#f0b27a'], mysql: ['#00758f', '#9fcfdc'] }[r.backend as Backend];
      const color = impl.startsWith('ours') ? palette[0] : palette[1];
      parts.push(`<text x="${left - 6}" y="${y + 10}" font-size="11" text-anchor="end">${impl}</text>`);
      parts.push(`<rect x="${left}" y="${y}" width="${Math.min(2, r.ratio) * scale}" height="${barH - 3}" fill="${color}"/>`);
      parts.push(`<text x="${left + Math.min(2, r.ratio) * scale + 4}" y="${y + 10}" font-size="10">${r.ratio.toFixed(2)}×</text>`);
    });
    parts.push(`<line x1="${left + scale}" x2="${left + scale}" y1="${y0 + 4}" y2="${y0 + 8 + impls.length * barH}" stroke="#333" stroke-dasharray="3 3"/>`);
  });
  const height = 20 + phases.length * groupH;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif"><title>Throughput as a ratio of the raw floor of the same backend (dashed line = 1×)</title>${parts.join('')}</svg>\n`;
}

/** The runtime the targets are stated for: its run writes docs/project/benchmarks.md; another's goes beside it. */
const REFERENCE_NODE = 24;

function writeDocs(rows: Row[], table: string, pgVersion: string): void {
  const dir = path.resolve('docs/project');
  mkdirSync(dir, { recursive: true });
  const major = Number(process.versions.node.split('.')[0]);
  const reference = major === REFERENCE_NODE;
  if (reference) writeFileSync(path.join(dir, 'benchmarks.svg'), chart(rows));
  const cpus = os.cpus();
  const md = `# Benchmarks${reference ? '' : ` on Node ${major}`}
${reference ? '' : `\nThe same bench on Node ${major}, beside the reference runtime's (Node ${REFERENCE_NODE}) in [benchmarks.md](benchmarks.md), which has the analysis.\n`}
Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}: ${cpus.length} × ${cpus[0]?.model ?? 'CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version},
redis-server, a 1-member etcd, PostgreSQL ${pgVersion} (the test harness's: \`initdb\`, \`fsync=off\`) and ZooKeeper 3.8 (the
test harness's: standalone, \`forceSync=no\`, tick 500 ms) started by the script on loopback.

## Method

One process. Every implementation opens its own connection(s). Each run does ${ROUNDS} recorded rounds after one
warm-up round; in a round every implementation runs each phase for ${PHASE_MS} ms, in an order that rotates from
round to round. Ratios (× floor) compare an implementation with the raw floor of the same backend **in the same
round**; the table shows medians over ${RUNS} runs. Floors: Redis \`SET key id NX PX\` + compare-and-delete Lua,
polling every 1 ms while busy; etcd one txn put-if-absent on a shared lease + one delete, polling likewise;
PostgreSQL \`pg_try_advisory_lock\` + \`pg_advisory_unlock\` on a connection the lock keeps checked out of a
pool of 16 (a session lock belongs to its connection), polling likewise; ZooKeeper: create an ephemeral znode
\`/floor/<key>\` (busy: NODE_EXISTS, poll) + delete it. Ours on PostgreSQL runs with its defaults (a pool of 4 +
the LISTEN session, \`correctness\`), and on ZooKeeper with its defaults (\`correctness\`).
Waits are measured from the request to the grant. Fairness = least-served ÷ most-served worker. Redis commands and
etcd fsyncs (\`etcd_disk_wal_fsync_duration_seconds_count\`) and PostgreSQL WAL bytes (\`pg_current_wal_insert_lsn()\`) are counted on the servers per operation; client CPU
from \`process.cpuUsage()\`. "Max overlap" is the most holders of one key seen at once in-process (must be 1).

${reference ? '![ratios](benchmarks.svg)\n' : ''}
${table}
`;
  // Keep the hand-written analysis (everything from the marker on) across regenerations.
  const file = path.join(dir, reference ? 'benchmarks.md' : `benchmarks-node${major}.md`);
  const previous = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const marker = previous.indexOf(ANALYSIS_MARKER);
  writeFileSync(file, marker >= 0 ? `${md}\n${previous.slice(marker)}` : md);
  console.log(reference ? 'wrote docs/project/benchmarks.md and docs/project/benchmarks.svg' : `wrote docs/project/benchmarks-node${major}.md`);
}

void main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
