import { spawn } from 'node:child_process';
import { etcdHosts, redisUrl } from '../harness/lock-app.js';

/** `npm run demo` is one of the two commands of the README: it must keep working. */
describe('npm run demo', () => {
  it('exits 0 and shows the paused instance\'s late write rejected by the fence', async () => {
    const child = spawn(process.execPath, ['scripts/demo.mjs'], {
      env: { ...process.env, NODE_OPTIONS: '', REDIS_URL: redisUrl(), ETCD_HOSTS: etcdHosts().join(',') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(output).toMatch(/A's write with token \d+ was REJECTED \(stale-token\)/);
    expect(output).toContain('balance 61 (expected 61');
    expect(output).toContain('All checks passed');
    expect(code).toBe(0);
  }, 120_000);
});
