import { spawn } from 'node:child_process';
import path from 'node:path';
import { etcdHosts, redisUrl } from '../harness/lock-app.js';

const worker = path.resolve('.tmp/compiled/test/workers/bootstrap-fail-worker.js');

/** Run the worker; resolve with its output and how long it lived, or kill it (by PID) after `limitMs`. */
function run(env: Record<string, string>, limitMs: number): Promise<{ exited: boolean; ms: number; output: string }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(process.execPath, [worker], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve({ exited: false, ms: performance.now() - started, output });
    }, limitMs);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve({ exited: true, ms: performance.now() - started, output });
    });
  });
}

describe('another provider\'s onModuleInit fails: the process exits by itself (nothing of ours keeps it alive)', () => {
  it.each([
    ['Redis, untouched', { WORKER_REDIS_URL: redisUrl() }],
    ['Redis, used during init', { WORKER_REDIS_URL: redisUrl(), WORKER_LOCK_AT_INIT: '1' }],
    ['Redis and etcd, both used during init', { WORKER_REDIS_URL: redisUrl(), WORKER_ETCD_HOSTS: etcdHosts().join(','), WORKER_LOCK_AT_INIT: '1' }],
  ])('%s', async (_case, env) => {
    const result = await run(env as Record<string, string>, 15_000);
    expect(result.output).toContain('bootstrap failed: the database migration failed');
    expect(result.exited).toBe(true);
  }, 20_000);
});
