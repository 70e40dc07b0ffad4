import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { EtcdCluster, freePort, RedisServer } from '../harness/servers.mjs';
import { samplesOf } from './markdown.js';

const run = promisify(execFile);
const root = process.cwd();
const dir = join(root, '.tmp/quick-start');

/** The README's quick start: the first TypeScript sample under "## Quick start", a whole main.ts. */
function quickStart(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Quick start\n'));
  const sample = samplesOf(section).find((s) => s.lang === 'ts');
  if (!sample) throw new Error('README.md has no ```ts sample under "## Quick start"');
  return sample.code;
}

async function post(url: string): Promise<{ status: number; body: { id?: string; token?: string } }> {
  const res = await fetch(url, { method: 'POST' });
  return { status: res.status, body: (await res.json()) as { id?: string; token?: string } };
}

// The quick start "runs as written": the file is compiled and started as it stands (only the
// package's name is pointed at this checkout's lib/, which is what installing it would do), against
// a redis-server and an etcd of its own given by the environment variables the sample reads.
describe("the README's quick start, run as written", () => {
  let redis: RedisServer;
  let etcd: EtcdCluster;
  let app: ChildProcess | undefined;
  let base: string;
  let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  let output = '';

  beforeAll(async () => {
    const code = quickStart();
    expect(code).toContain("from 'nest-distributed-lock'");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'main.ts'), code.replaceAll("from 'nest-distributed-lock'", "from '../../lib/index.js'"));
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ extends: '../../tsconfig.json', compilerOptions: { rootDir: '../..', outDir: 'out', declaration: false, sourceMap: false, types: ['node'], paths: {} }, include: ['main.ts'] }),
    );
    await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { cwd: root, timeout: 150_000 }).catch((error: { stdout?: string }) => {
      throw new Error(`the quick start does not compile:\n${error.stdout ?? String(error)}`);
    });
    [redis, etcd] = await Promise.all([RedisServer.start(), EtcdCluster.start({ size: 1 })]);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = spawn(process.execPath, [join(dir, 'out/.tmp/quick-start/main.js')], {
      cwd: dir,
      env: { ...process.env, NODE_OPTIONS: '', REDIS_URL: redis.url, ETCD_HOSTS: etcd.hosts.join(','), PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    app.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    app.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    exited = new Promise((resolve) => app!.on('exit', (code, signal) => resolve({ code, signal })));
    // Listening: the first request that gets any answer (bounded: 20 s).
    const deadline = Date.now() + 20_000;
    for (;;) {
      const ok = await fetch(`${base}/`).then(
        () => true,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline || app.exitCode !== null) throw new Error(`the quick start did not listen on ${base}:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 240_000);

  afterAll(async () => {
    if (app && app.exitCode === null && app.signalCode === null) app.kill('SIGKILL');
    await Promise.all([redis?.stop(), etcd?.stop()]);
  });

  it('compiles in a CommonJS project too (Nest 11\'s default): no top-level await', async () => {
    const cjs = join(root, '.tmp/quick-start-cjs');
    rmSync(cjs, { recursive: true, force: true });
    mkdirSync(cjs, { recursive: true });
    writeFileSync(join(cjs, 'package.json'), JSON.stringify({ type: 'commonjs' }));
    writeFileSync(join(cjs, 'main.ts'), quickStart().replaceAll("from 'nest-distributed-lock'", "from '../../lib/index.js'"));
    writeFileSync(join(cjs, 'tsconfig.json'), JSON.stringify({ extends: '../../tsconfig.json', compilerOptions: { rootDir: '../..', noEmit: true, types: ['node'], paths: {} }, include: ['main.ts'] }));
    const result = await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', cjs], { cwd: root, timeout: 150_000 }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(result).toBe('');
  }, 180_000);

  it('charges an order under a correctness lock, with a fencing token that grows from call to call', async () => {
    const first = await post(`${base}/orders/42/charge`);
    const second = await post(`${base}/orders/42/charge`);
    const other = await post(`${base}/orders/7/charge`);
    expect([first.status, second.status, other.status]).toEqual([201, 201, 201]);
    expect(first.body.id).toBe('42');
    expect(BigInt(second.body.token!)).toBeGreaterThan(BigInt(first.body.token!));
    expect(BigInt(other.body.token!)).toBeGreaterThan(BigInt(second.body.token!));
  });

  it('stops on SIGTERM within 10 s (its shutdown hooks close the module), printing no error', async () => {
    app!.kill('SIGTERM');
    const timeout = new Promise<'still running'>((r) => setTimeout(() => r('still running'), 10_000).unref());
    const result = await Promise.race([exited, timeout]);
    expect(result).not.toBe('still running');
    // Nest re-raises the signal once the application has closed.
    expect(result).toEqual(expect.objectContaining({ signal: 'SIGTERM' }));
    expect(output).not.toMatch(/Error|error/);
  }, 15_000);
});
