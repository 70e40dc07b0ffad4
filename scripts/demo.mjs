#!/usr/bin/env node
// `npm run demo`: builds the package and the sample app, starts redis-server itself unless
// REDIS_URL is set, runs two instances of the sample app, drives concurrent requests at both,
// prints who held the lock when, and exits by itself (non-zero if two runs ever overlapped).
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RedisServer, ensureBinary } from '../test/harness/servers.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tsc = path.join(root, 'node_modules', '.bin', 'tsc');
const log = (line = '') => console.log(line);

for (const project of ['tsconfig.build.json', 'tsconfig.sample.json']) {
  const built = spawnSync(tsc, ['-p', project], { cwd: root, stdio: 'inherit' });
  if (built.status !== 0) process.exit(built.status ?? 1);
}

const cleanup = [];
const instances = [];
let exitCode = 0;
try {
  let redisUrl = process.env.REDIS_URL;
  if (!redisUrl) {
    ensureBinary('redis-server');
    const redis = await RedisServer.start();
    cleanup.push(() => redis.stop());
    redisUrl = redis.url;
    log(`Started redis-server on ${redisUrl} (pid ${redis.pid}); set REDIS_URL to use your own.`);
  } else {
    log(`Using REDIS_URL=${redisUrl}`);
  }

  for (const name of ['A', 'B']) instances.push(await startInstance(name, redisUrl));
  log(`Two replicas of the sample app: ${instances.map((i) => `${i.name} on :${i.port}`).join(', ')}`);
  log();

  const runs = [];
  log('1. Both replicas are asked to build the "daily" report at the same moment, 4 times.');
  log('   wait=0: the replica that finds the lock taken answers 409 and does not run it.');
  for (let round = 1; round <= 4; round++) {
    const answers = await Promise.all(instances.map((i) => post(i, '/reports/daily?wait=0')));
    const line = answers.map((a, n) => `${instances[n].name}: ${a.status === 201 ? 'ran it' : `${a.status} busy`}`);
    log(`   round ${round}: ${line.join(', ')}`);
    for (const a of answers) if (a.status === 201) runs.push(a.body);
  }
  log();
  log('2. Six requests for the "weekly" report (three per replica), wait=5000: they queue in');
  log('   arrival order and each run starts only after the previous one released the lock.');
  const queued = [];
  for (let n = 0; n < 6; n++) {
    queued.push(post(instances[n % 2], '/reports/weekly?wait=5000'));
    await new Promise((r) => setTimeout(r, 10));
  }
  const weekly = (await Promise.all(queued)).map((a) => a.body);
  const t0 = Math.min(...weekly.map((r) => r.startedAt));
  for (const run of [...weekly].sort((x, y) => x.startedAt - y.startedAt)) {
    log(`   ${run.instance} held "report:weekly" from +${run.startedAt - t0} ms to +${run.finishedAt - t0} ms`);
  }
  runs.push(...weekly);
  log();

  const overlaps = countOverlaps(runs);
  log(`Summary: ${runs.length} runs, ${overlaps} overlapping runs of the same report.`);
  if (overlaps > 0) exitCode = 1;
} catch (error) {
  console.error(`demo failed: ${error.stack ?? error}`);
  exitCode = 1;
} finally {
  await Promise.all(instances.map((i) => i.stop()));
  for (const step of cleanup) await step();
}
process.exit(exitCode);

function countOverlaps(runs) {
  let overlaps = 0;
  const byReport = new Map();
  for (const run of runs) byReport.set(run.report, [...(byReport.get(run.report) ?? []), run]);
  for (const list of byReport.values()) {
    list.sort((a, b) => a.startedAt - b.startedAt);
    for (let i = 1; i < list.length; i++) if (list[i].startedAt < list[i - 1].finishedAt) overlaps += 1;
  }
  return overlaps;
}

async function post(instance, url) {
  const response = await fetch(`http://127.0.0.1:${instance.port}${url}`, { method: 'POST' });
  return { status: response.status, body: await response.json() };
}

function startInstance(name, redisUrl) {
  const child = spawn(process.execPath, [path.join(root, '.tmp/sample/sample-app/main.js')], {
    cwd: root,
    env: { ...process.env, REDIS_URL: redisUrl, PORT: '0', INSTANCE_NAME: name, REPORT_WORK_MS: '150' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
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
        resolve({ name, port: Number(match[1]), stop });
      }
    });
    child.once('exit', (code) => reject(new Error(`instance ${name} exited with code ${code}: ${out}`)));
  });
}
