#!/usr/bin/env node
// `npm run test:faults [-- --long]`: compile, then run the fault suite outside jest (see test/faults/run.ts).
import { spawnSync } from 'node:child_process';
import { copyFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tsc = spawnSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--outDir', '.tmp/compiled'], { cwd: root, stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
// tsc emits only TypeScript: bring the plain-ESM harness next to the compiled code that imports it.
for (const file of readdirSync(path.join(root, 'test/harness')).filter((f) => f.endsWith('.mjs'))) {
  copyFileSync(path.join(root, 'test/harness', file), path.join(root, '.tmp/compiled/test/harness', file));
}
const run = spawnSync(process.execPath, [path.join(root, '.tmp/compiled/test/faults/run.js'), ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
process.exit(run.status ?? 1);
