#!/usr/bin/env node
// `npm test`: type-check, start the real servers the suites need on free loopback ports, run
// jest against them, and stop the servers afterwards whatever the outcome.
//   npm test                  everything
//   npm test -- --unit        only the unit specs (no servers)
//   npm test -- <jest args>   passed on to jest (e.g. a path pattern)
//   npm test -- --long        everything, and the long stress specs (*.long.spec.ts: minutes each)
//   npm test -- --quick       the quick tier: unit specs, the memory, Redis (each client) and etcd
//                             integration specs, the decorator's e2e specs, the conformance suite, the docs test
//                             and the packed-tarball test (what CI
//                             runs on the other Node.js lines: `npm run test:node -- 24 26 --quick`)
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import { EtcdCluster, RedisServer, ensureBinary } from '../test/harness/servers.mjs';
import { ensureZooKeeper } from '../test/harness/zookeeper.mjs';
import { ensurePg } from '../test/harness/postgres.mjs';
import { ensurePgBouncer } from '../test/harness/pgbouncer.mjs';
import { ensureMariaDb } from '../test/harness/mariadb.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
const unitOnly = args.includes('--unit');
const longMode = args.includes('--long');
const quick = args.includes('--quick');
const jestArgs = args.filter((a) => a !== '--unit' && a !== '--long' && a !== '--quick');

/** The quick tier's spec files (path patterns). */
const QUICK = [
  '/lib/.*\\.spec\\.ts$',
  '/test/integration/(redis|node-redis|etcd|semaphore-(memory|redis|etcd)|lease-lifetime|engine-composition|service-semantics|reentrant-options|release-to-next-waiter)[^/]*\\.spec\\.ts$',
  '/test/e2e/decorator-[^/]*\\.spec\\.ts$',
  '/test/conformance/[^/]*\\.spec\\.ts$',
  // The docs: samples compiled, links and anchors resolved, the README's quick start run.
  '/test/docs/[^/]*\\.spec\\.ts$',
  // The packed tarball installed into Nest 11 and 12 projects, run under this Node.
  '/test/package/[^/]*\\.spec\\.ts$',
];

const bin = (name) => path.join(root, 'node_modules', '.bin', name);
/** A program on the PATH, or undefined. */
const which = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim() || undefined;

// Type-check everything and emit it to .tmp/compiled: worker processes of the fault specs run from there.
console.log('[test] type-checking and compiling (tsc -p tsconfig.json --outDir .tmp/compiled)');
const tsc = spawnSync(bin('tsc'), ['-p', 'tsconfig.json', '--outDir', '.tmp/compiled'], { cwd: root, stdio: 'inherit' });
// TYPECHECK=warn (local work only): report type errors but run the specs anyway, so one
// half-edited file elsewhere in the tree does not stop a focused run. CI never sets it.
if (tsc.status !== 0) {
  if (process.env.TYPECHECK === 'warn') console.warn('[test] type errors above (TYPECHECK=warn: running the specs anyway)');
  else process.exit(tsc.status ?? 1);
}

const servers = [];
// A jest worker force-exited after its last file ("failed to exit gracefully") writes what held it
// here (test/harness/exit-probe.mjs); printed after the run.
const exitProbeDir = path.join(root, '.tmp', 'exit-probe');
rmSync(exitProbeDir, { recursive: true, force: true });
const exitProbe = pathToFileURL(path.join(root, 'test', 'harness', 'exit-probe.mjs')).href;
const env = {
  ...process.env,
  NDL_EXIT_PROBE_DIR: exitProbeDir,
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --experimental-vm-modules --import=${exitProbe}`.trim(),
};
let exitCode = 1;
try {
  if (unitOnly) {
    jestArgs.push('--testPathPatterns', '^.*/lib/.*\\.spec\\.ts$');
  } else {
    // Every server the specs start, installed up front and one at a time: two specs installing the
    // same package at once (two jest workers on a fresh machine) made one of them fail.
    ensureBinary('redis-server');
    ensureBinary('etcd');
    ensureZooKeeper();
    if (!process.env.PGHOST) ensurePg();
    ensurePgBouncer();
    ensureMariaDb();
    ensureBinary('faketime');
    env.TEST_CHROMIUM = ensureBinary('chromium');
    const [redis, etcd] = await Promise.all([RedisServer.start(), EtcdCluster.start({ size: 1, logLevel: 'warn' })]);
    servers.push(redis, etcd);
    env.TEST_REDIS_URL = redis.url;
    env.TEST_ETCD_HOSTS = etcd.hosts.join(',');
    console.log(`[test] redis-server ${redis.url} (pid ${redis.pid}), etcd ${etcd.hosts} (pid ${etcd.members[0].pid})`);
  }
  // A full run (no jest arguments) runs two jest processes at once. The suites that inject timed
  // faults and check timing bounds (the fault suite, the seeded simulation) run one file at a time
  // at normal priority; the rest run three at a time at a lower priority (nice 10, which their
  // servers and worker processes inherit), so that on 2 cores the timed suites get the CPU they ask
  // for (about one core) and the rest take what is left. Run one after the other, the two took
  // 266 s + 618 s on 2 cores (2026-12-08, a quiet machine): the timed phase left a core idle.
  // On 2 cores one worker for everything took 11 minutes; the timed suites failed their bounds (a
  // liveness bound by 160 ms, a pause that overtook nobody) when they shared the machine at equal
  // priority. Every spec starts its own servers or keys, so the two processes share no state.
  const TIMED = ['test/faults/fault-suite.spec.ts', 'test/simulation/simulation.spec.ts'];
  // The long stress specs (races run for a minute or more) keep the suite under 10 minutes on 2
  // cores by running only with --long (or named by path).
  const LONG = ['\\.long\\.spec\\.ts$'];
  const phases = jestArgs.length > 0 || unitOnly
    ? [{ args: jestArgs }]
    : quick
    ? [{ args: ['--maxWorkers=3', '--testPathIgnorePatterns', '\\.long\\.spec\\.ts$', '--testPathPatterns', ...QUICK] }]
    : [
        { args: ['--runInBand', ...TIMED], name: 'timed suites', log: path.join(root, '.tmp', 'test-timed.log') },
        { args: ['--maxWorkers=4', '--testPathIgnorePatterns', ...TIMED.map((t) => t.replaceAll('.', '\\.')), ...(longMode ? [] : LONG)], nice: 5 },
      ];
  // Ctrl-C (or a SIGTERM) ends the run: every running jest gets it.
  const running = new Set();
  const stop = { signal: undefined };
  const forward = (sig) => {
    stop.signal = sig;
    for (const jest of running) jest.kill(sig);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  // A leaked socket must fail the run, not hang it: stop jest after 15 minutes.
  const guard = setTimeout(() => {
    console.error('[test] jest still running after 15 minutes: stopping it (a test leaked an open handle?)');
    for (const jest of running) jest.kill('SIGKILL');
  }, 15 * 60_000);
  guard.unref();
  /** One jest process; resolves with its exit code. A phase with a log writes there and is printed when it ends. */
  const runPhase = async ({ args: phaseArgs, name, log, nice }) => {
    const out = log ? openSync(log, 'w') : undefined;
    // Under the Node.js that runs this script (npm run test:node runs it under other lines); a lower
    // priority through nice(1), so the whole process and everything it starts has it from the start.
    const command = [process.execPath, path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'), ...phaseArgs];
    const niced = nice && which('nice');
    const jest = spawn(niced ? niced : command[0], niced ? ['-n', String(nice), ...command] : command.slice(1), {
      cwd: root,
      env,
      stdio: out === undefined ? 'inherit' : ['ignore', out, out],
    });
    running.add(jest);
    if (log) console.log(`[test] ${name} (${phaseArgs.filter((a) => !a.startsWith('-')).join(', ')}) running beside the rest; their output: ${path.relative(root, log)}, printed when they end`);
    const code = await new Promise((resolve) => jest.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
    running.delete(jest);
    if (out !== undefined) {
      closeSync(out);
      console.log(`\n[test] ${name}: exit ${code}\n${readFileSync(log, 'utf8').trimEnd()}\n[test] end of the ${name}' output\n`);
    }
    return code;
  };
  const codes = stop.signal ? [1] : await Promise.all(phases.map(runPhase));
  exitCode = codes.find((code) => code !== 0) ?? (stop.signal ? 1 : 0);
  if (stop.signal) console.error(`[test] stopped by ${stop.signal}`);
  // A spec that failed on an etcd answer past its bound: what the shared etcd said of its own slowness.
  const slow = servers.flatMap((server) => server.members?.flatMap((member) => member.slow ?? []) ?? []);
  if (exitCode !== 0 && slow.length > 0) console.error(`[test] the shared etcd reported being slow (last ${slow.length}):\n${slow.join('\n')}`);
  if (existsSync(exitProbeDir)) {
    for (const file of readdirSync(exitProbeDir)) console.error(`[test] ${readFileSync(path.join(exitProbeDir, file), 'utf8').trimEnd()}`);
  }
} catch (error) {
  console.error(`[test] ${error.message}`);
} finally {
  await Promise.all(servers.map((s) => s.stop()));
}
process.exit(exitCode);
