#!/usr/bin/env node
// `npm run demo`: builds the package and the sample app, starts redis-server and etcd itself
// unless REDIS_URL / ETCD_HOSTS are set, runs two instances of the sample app, drives concurrent
// requests at them, freezes one (SIGSTOP, a "GC pause") past its lease, and prints who held
// which lock when, which token each write carried, and that the paused instance's late write was
// rejected. Exits 0 when every check holds, 1 otherwise.
//
// SAMPLE_BACKEND=postgres: the same story on PostgreSQL alone — every lock (efficiency and
// correctness) on the PostgreSQL backend, the balances in a PgFence-guarded table of the same
// database. It starts its own PostgreSQL (initdb in a temp dir) unless DATABASE_URL is set, and
// needs neither Redis nor etcd.
//
// Each replica mounts the lock board at /locks (user ops, a password the demo makes up and
// prints); `npm run demo -- --stay` keeps the replicas up after the checks, to look at it.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { EtcdCluster, RedisServer, ensureBinary } from '../test/harness/servers.mjs';
import { PostgresServer } from '../test/harness/postgres.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
const log = (line = '') => console.log(line);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const failures = [];
const stay = process.argv.includes('--stay');
const boardToken = randomBytes(9).toString('base64url');
const boardAuth = { authorization: `Basic ${Buffer.from(`ops:${boardToken}`).toString('base64')}` };
const onPostgres = process.env.SAMPLE_BACKEND === 'postgres';
if (process.env.SAMPLE_BACKEND && !['postgres', 'redis-etcd'].includes(process.env.SAMPLE_BACKEND)) {
  console.error(`SAMPLE_BACKEND must be postgres or redis-etcd, got "${process.env.SAMPLE_BACKEND}"`);
  process.exit(2);
}
// What the story calls each backend, and why a frozen holder loses its lock.
const names = onPostgres
  ? { efficiency: 'PostgreSQL', correctness: 'PostgreSQL', expiry: 'past its 1.5 s lease (its row expires on the database clock)', expired: "A's lease row expired" }
  : { efficiency: 'Redis', correctness: 'etcd', expiry: 'past its 1.5 s lease and its 2 s etcd session', expired: "A's session lease expired" };
/** `read()` until `ok(value)`, every 100 ms, for at most `withinMs`: the last value, whether it held, and when. */
async function waitFor(read, ok, withinMs) {
  const started = Date.now();
  for (;;) {
    const value = await read();
    if (ok(value)) return { value, ok: true, ms: Date.now() - started };
    if (Date.now() - started >= withinMs) return { value, ok: false, ms: Date.now() - started };
    await sleep(100);
  }
}
const check = (ok, what) => {
  if (!ok) failures.push(what);
  return ok;
};

// Incremental: a second run with nothing changed compiles nothing (~1 s instead of ~10 s CPU each).
// Each build's record lives in its own output folder, so deleting the output deletes the record
// too (a record left behind would make tsc skip emitting the files it thinks are there).
for (const [project, outDir] of [['tsconfig.build.json', 'dist'], ['tsconfig.sample.json', '.tmp/sample']]) {
  const built = spawnSync(tsc, ['-p', project, '--incremental', '--tsBuildInfoFile', path.join(outDir, `.${path.basename(project, '.json')}.tsbuildinfo`)], { cwd: root, stdio: 'inherit' });
  if (built.error) console.error(`demo: cannot run ${tsc} (${built.error.code ?? built.error.message}): run \`npm ci\` first`);
  else if (built.status !== 0) console.error(`demo: tsc -p ${project} failed (exit ${built.status ?? built.signal})`);
  if (built.status !== 0) process.exit(built.status ?? 1);
}

const cleanup = [];
const instances = [];
try {
  const env = {};
  if (onPostgres) {
    env.SAMPLE_BACKEND = 'postgres';
    env.DATABASE_URL = process.env.DATABASE_URL;
    if (!env.DATABASE_URL) {
      const pg = await PostgresServer.start();
      cleanup.push(() => pg.stop());
      env.DATABASE_URL = pg.url;
    }
    log(`PostgreSQL ${env.DATABASE_URL.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@')} (every lock, and the fenced accounts table)`);
    log(process.env.DATABASE_URL ? '' : '(started by the demo; set DATABASE_URL to use your own)');
  } else {
    let redisUrl = process.env.REDIS_URL;
    let etcdHosts = process.env.ETCD_HOSTS;
    if (!redisUrl) {
      ensureBinary('redis-server');
      const redis = await RedisServer.start();
      cleanup.push(() => redis.stop());
      redisUrl = redis.url;
    }
    if (!etcdHosts) {
      ensureBinary('etcd');
      const etcd = await EtcdCluster.start({ size: 1 });
      cleanup.push(() => etcd.stop());
      etcdHosts = etcd.hosts.join(',');
    }
    log(`Redis ${redisUrl} (efficiency locks, fenced store) · etcd ${etcdHosts} (correctness locks)`);
    log(process.env.REDIS_URL || process.env.ETCD_HOSTS ? '' : '(started by the demo; set REDIS_URL / ETCD_HOSTS to use your own)');
    Object.assign(env, { REDIS_URL: redisUrl, ETCD_HOSTS: etcdHosts });
  }

  for (const name of ['A', 'B']) instances.push(await startInstance(name, env));
  const [a, b] = instances;
  log(`Two replicas of the sample app: ${instances.map((i) => `${i.name} on :${i.port}`).join(', ')}`);
  log(`Lock board: http://127.0.0.1:${b.port}/locks (user ops, password ${boardToken})${stay ? '' : ' — while the demo runs; `npm run demo -- --stay` keeps it up'}`);
  log();

  // 1. efficiency ------------------------------------------------------------------------
  log(`1. efficiency lock (${names.efficiency}): both replicas are asked to build the "daily" report at once.`);
  for (let round = 1; round <= 3; round++) {
    const answers = await Promise.all(instances.map((i) => call(i, 'POST', '/reports/daily?wait=0')));
    log(`   round ${round}: ${answers.map((r, n) => `${instances[n].name} ${r.status === 201 ? 'built it' : `got ${r.status} (busy, skipped)`}`).join(', ')}`);
    check(answers.filter((r) => r.status === 201).length >= 1, 'a report round where nobody built the report');
  }
  log();

  // 2. correctness -----------------------------------------------------------------------
  const account = `acct-${Date.now().toString(36)}`;
  log(`2. correctness lock (${names.correctness}): six deposits of 10 into ${account}, three through each replica, at once.`);
  const deposits = await Promise.all([0, 1, 2, 3, 4, 5].map((n) => call(instances[n % 2], 'POST', `/accounts/${account}/deposit?amount=10`)));
  const accepted = deposits.filter((d) => d.status === 201).map((d) => d.body).sort((x, y) => (BigInt(x.token) < BigInt(y.token) ? -1 : 1));
  for (const d of accepted) log(`   ${d.instance} held account:${account} on ${d.backend} with token ${d.token} → balance ${d.balance}`);
  const afterDeposits = (await call(a, 'GET', `/accounts/${account}`)).body;
  log(`   balance ${afterDeposits.balance} (expected 60): no deposit lost, each holder saw the previous one's write`);
  check(accepted.length === 6 && afterDeposits.balance === 60, 'concurrent deposits lost an update');
  check(accepted.every((d) => d.backend === (onPostgres ? 'postgres' : 'etcd')), `a correctness lock was not granted by ${names.correctness}`);
  log();

  // 3. a GC pause ------------------------------------------------------------------------
  log(`3. A "GC pause": A takes the lock for a deposit of 100, reads the balance, and is frozen`);
  log(`   (SIGSTOP) for 5 s before it writes — ${names.expiry}.`);
  const paused = call(a, 'POST', `/accounts/${account}/deposit?amount=100`);
  await sleep(300);
  a.child.kill('SIGSTOP');
  const frozenAt = Date.now();
  log('   A frozen. B deposits 1 meanwhile:');
  const byB = await call(b, 'POST', `/accounts/${account}/deposit?amount=1`);
  log(`   B got the lock ${((Date.now() - frozenAt) / 1000).toFixed(1)} s into the pause (${names.expired}), token ${byB.body.token} → balance ${byB.body.balance}`);
  check(byB.status === 201, "B's deposit during A's pause failed");
  await sleep(Math.max(0, 5_000 - (Date.now() - frozenAt)));
  a.child.kill('SIGCONT');
  log('   A resumes and, unaware, writes its stale result:');
  const late = await paused;
  if (late.status === 409) {
    log(`   A's write with token ${late.body.token} was REJECTED (${late.body.rejected}): ${late.body.message}`);
  } else {
    log(`   A's write was accepted (status ${late.status}) — that would be a lost update!`);
  }
  check(late.status === 409 && late.body.rejected === 'stale-token', "the paused instance's late write was not rejected by the fence");
  const final = (await call(b, 'GET', `/accounts/${account}`)).body;
  log(`   balance ${final.balance} (expected 61: A's deposit never happened, B's survived), fence ${final.fence}`);
  check(final.balance === 61, 'the final balance is wrong');
  log();

  // 4. cron ----------------------------------------------------------------------------
  log('4. @Cron every 2 s with an efficiency lock (ttl 5 s = lockAtMostFor, lockAtLeastFor 1.5 s), in both replicas:');
  const statuses = await Promise.all(instances.map((i) => call(i, 'GET', '/status')));
  const runs = statuses
    .flatMap((s) => s.body.digestRuns.map((r) => ({ ...r, by: s.body.instance })))
    .sort((x, y) => x.startedAt - y.startedAt);
  for (const [i, run] of runs.entries()) {
    const overlaps = i > 0 && run.startedAt < runs[i - 1].finishedAt;
    log(`   ${new Date(run.startedAt).toISOString().slice(11, 23)} ran on ${run.by}${overlaps ? '  ← OVERLAPS the previous run!' : ''}`);
    check(!overlaps, `two digest runs overlapped at ${run.startedAt}`);
  }
  log(`   skipped (lock busy): ${statuses.map((s) => `${s.body.instance} ${s.body.digestSkips.length}×`).join(', ')}`);
  log('   (lockAtLeastFor keeps the lock 1.5 s after each run: a replica that fires a tick late —');
  log('   like A when it resumed from its pause — finds the lock taken instead of repeating the run.)');
  log();

  // 5. leader election ---------------------------------------------------------------------
  log(`5. Leader election (${names.correctness}): both replicas campaign for "sample:leader"; a @Cron sweep runs every second on the leader only.`);
  // A replica whose term ended (the paused one) campaigns again after its back-off: wait for it to
  // be in line (bounded: 10 s, five times the back-off and its campaign), not one look and hope.
  const campaigning = await waitFor(async () => (await call(b, 'GET', '/status/locks')).body['sample:leader'], (l) => l !== null && l !== undefined && l.waiters === 1, 10_000);
  const leader = campaigning.value;
  log(`   GET /status/locks → sample:leader ${leader ? `held on ${leader.backend}, token ${leader.token}, ${leader.remainingMs} ms left, ${leader.waiters} waiting` : 'not held'}${campaigning.ok ? ` (seen after ${campaigning.ms} ms)` : ''}`);
  check(campaigning.ok, 'the leader lock was not held with the other replica waiting (within 10 s)');
  const sweeps = (await Promise.all(instances.map((i) => call(i, 'GET', '/status'))))
    .flatMap((s) => s.body.sweepRuns.map((run) => ({ ...run, by: s.body.instance })))
    .sort((x, y) => x.at - y.at);
  const terms = [];
  for (const run of sweeps) {
    const last = terms.at(-1);
    if (last && last.term === run.term) {
      last.runs++;
      last.to = run.at;
      if (run.by !== last.by) last.shared = true;
    } else terms.push({ term: run.term, by: run.by, runs: 1, from: run.at, to: run.at });
  }
  for (const t of terms) log(`   term ${t.term} on ${t.by}: ${t.runs} sweep(s), ${clock(t.from)}–${clock(t.to)}`);
  check(terms.length >= 1, 'the sweep never ran');
  check(terms.every((t) => !t.shared), 'a term ran on two replicas');
  check(new Set(terms.map((t) => t.term)).size === terms.length, 'a term came back after another term');
  check(terms.every((t, i) => i === 0 || BigInt(t.term) > BigInt(terms[i - 1].term)), 'a later term had a smaller token');
  log('   Each term ran on one replica, one after the other, with a larger token each time');
  log('   (a leader paused past its session is replaced, and its next sweep finds its term lost).');
  log();
  // 6. the lock board ---------------------------------------------------------------------
  // The sample's keys only (?prefix=sample:), as an operator of a shared etcd or Redis filters: the
  // board lists the newest 100 holds, and other applications' keys (npm test runs this demo beside
  // specs holding over a thousand) would push the leader off it.
  log(`6. The lock board (http://127.0.0.1:${b.port}/locks): what an operator sees, through its JSON API (the sample's keys: ?prefix=sample:).`);
  const refused = await call(b, 'GET', '/locks/api/locks');
  log(`   without the password: ${refused.status}`);
  check(refused.status === 401, 'the lock board answered without its password');
  // The same state through the board (a moment later: a term may have changed hands meanwhile, so bounded again).
  const shownOnBoard = await waitFor(
    async () => (await call(b, 'GET', '/locks/api/locks?prefix=sample%3A', boardAuth)).body,
    (v) => v.backends.flatMap((backend) => backend.locks).some((l) => l.key === 'sample:leader' && l.waiters === 1),
    10_000,
  );
  const view = shownOnBoard.value;
  for (const backend of view.backends) {
    const shown = backend.locks.map((l) => `${l.key}${l.token ? ` (token ${l.token})` : ''}${l.waiters ? `, ${l.waiters} waiting` : ''}`);
    log(`   ${backend.name} (${backend.purposes.join(', ')}): ${shown.length ? shown.join('; ') : 'nothing held'}`);
  }
  const leaderRow = view.backends.flatMap((backend) => backend.locks).find((l) => l.key === 'sample:leader');
  check(leaderRow !== undefined && leaderRow.waiters === 1, 'the board did not show sample:leader held with the other replica waiting');
  const page = await fetch(`http://127.0.0.1:${b.port}/locks`, { headers: boardAuth });
  check(page.status === 200 && (page.headers.get('content-security-policy') ?? '').includes("default-src 'none'"), 'the board page did not load with its Content-Security-Policy');
  log(`   the page: ${page.status}, ${page.headers.get('content-type')}, CSP ${page.headers.get('content-security-policy')?.split(';')[0]}; …`);
  log();
  if (stay && failures.length === 0) {
    log(`The replicas stay up: open http://127.0.0.1:${b.port}/locks (user ops, password ${boardToken}). Ctrl-C stops them.`);
    await new Promise((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
  }
} catch (error) {
  console.error(`demo failed: ${error.stack ?? error}`);
  failures.push(String(error));
} finally {
  await Promise.all(instances.map((i) => i.stop()));
  for (const step of cleanup) await step();
}
if (failures.length) {
  log(`FAILED: ${failures.join('; ')}`);
  process.exit(1);
}
log('All checks passed: one holder at a time, no lost update, and the stale write was refused by the resource.');
process.exit(0);

function clock(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

async function call(instance, method, url, headers = {}) {
  const response = await fetch(`http://127.0.0.1:${instance.port}${url}`, { method, headers });
  return { status: response.status, body: await response.json() };
}

function startInstance(name, backendEnv) {
  const child = spawn(process.execPath, [path.join(root, '.tmp/sample/sample-app/main.js')], {
    cwd: root,
    env: { ...process.env, ...backendEnv, BOARD_TOKEN: boardToken, ETCD_SESSION_TTL: '2', PORT: '0', INSTANCE_NAME: name, REPORT_WORK_MS: '150', DEPOSIT_WORK_MS: '800' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`instance ${name} did not start within 20 s: ${out}`)), 20_000);
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /LISTENING (\d+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({ name, port: Number(match[1]), child, stop });
      }
    });
    child.once('exit', (code) => reject(new Error(`instance ${name} exited with code ${code}: ${out}`)));
  });
}
