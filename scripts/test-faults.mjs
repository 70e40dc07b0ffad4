#!/usr/bin/env node
// `npm run test:faults [-- --long]`: compile, then run the fault suite outside jest (see test/faults/run.ts).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tsc = spawnSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json', '--outDir', '.tmp/compiled'], { cwd: root, stdio: 'inherit' });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
const run = spawnSync(process.execPath, [path.join(root, '.tmp/compiled/test/faults/run.js'), ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
process.exit(run.status ?? 1);
