#!/usr/bin/env node
// `npm run bench [-- --runs N] [-- --quick] [-- --soak]`: compile, then run bench/run.ts (see its header);
// `npm run bench -- --profile [--cpu-prof] …`: bench/profile.ts (the Redis path alone; see its header).
import { spawnSync } from 'node:child_process';
import { copyFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBinary } from '../test/harness/servers.mjs';
import { ensurePg } from '../test/harness/postgres.mjs';
import { ensureZooKeeper } from '../test/harness/zookeeper.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
// Every server the bench starts, installed up front (as scripts/test.mjs does): an apt-get run
// inside the bench blocks its event loop while other servers start, and a fresh machine's first
// `npm run bench` failed so (Redis's start-up PING timed out while ZooKeeper was installing).
ensureBinary('redis-server');
ensureBinary('etcd');
ensureZooKeeper();
if (!process.env.PGHOST) ensurePg();
const tsc = spawnSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--outDir', '.tmp/compiled'], { cwd: root, stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
for (const file of readdirSync(path.join(root, 'test/harness')).filter((f) => f.endsWith('.mjs'))) {
  copyFileSync(path.join(root, 'test/harness', file), path.join(root, '.tmp/compiled/test/harness', file));
}
// --profile: the Redis path alone (bench/profile.ts); --cpu-prof also writes a V8 CPU profile to .tmp/profiles.
const args = process.argv.slice(2);
const script = args.includes('--profile') ? 'profile.js' : 'run.js';
const node = ['--expose-gc', ...(args.includes('--cpu-prof') ? ['--cpu-prof', '--cpu-prof-dir=.tmp/profiles'] : [])];
const run = spawnSync(process.execPath, [...node, path.join(root, '.tmp/compiled/bench', script), ...args.filter((a) => a !== '--cpu-prof')], { cwd: root, stdio: 'inherit' });
process.exit(run.status ?? 1);
