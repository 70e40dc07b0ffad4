#!/usr/bin/env node
// `npm run test:simulation [-- --seed N | --seeds N | --long …]`: compile, then run the seeded
// simulation outside jest (see test/simulation/cli.ts for the options).
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const args = process.argv.slice(2);
{
  const tsc = spawnSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--outDir', '.tmp/compiled'], { cwd: root, stdio: 'inherit' });
  // TYPECHECK=warn (local work only): a type error elsewhere in the tree does not stop the run.
  if (tsc.status !== 0 && process.env.TYPECHECK !== 'warn') process.exit(tsc.status ?? 1);
}
// tsc emits only TypeScript: bring the plain-ESM harness next to the compiled code that imports it.
for (const file of readdirSync(path.join(root, 'test/harness')).filter((f) => f.endsWith('.mjs'))) {
  copyFileSync(path.join(root, 'test/harness', file), path.join(root, '.tmp/compiled/test/harness', file));
}
const run = spawn(process.execPath, [path.join(root, '.tmp/compiled/test/simulation/cli.js'), ...args], { cwd: root, stdio: 'inherit' });
// A terminal's Ctrl-C reaches the run directly (same process group); a SIGTERM (timeout, kill) is
// passed on. Either way the run finishes its seed and prints the summary.
process.on('SIGINT', () => undefined);
process.on('SIGTERM', () => run.kill('SIGTERM'));
run.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
