import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { redisUrl } from '../harness/lock-app.js';

const run = promisify(execFile);
const root = process.cwd();
const tsc = join(root, 'node_modules/typescript/bin/tsc');

interface Consumer {
  name: string;
  type: 'module' | 'commonjs';
  nest: string;
  dependencies: Record<string, string>;
  /** Its entry point (test/package/consumer/); the Redis client it installs. @default main.ts, ioredis */
  main?: string;
  redisClient?: Record<string, string>;
}

/** Throwaway Nest projects: the current major as ESM, the previous one as CommonJS (require(esm)). */
const consumers: Consumer[] = [
  {
    name: 'Nest 12, ESM',
    type: 'module',
    nest: '12.',
    dependencies: {
      '@nestjs/common': '^12.0.0',
      '@nestjs/core': '^12.0.0',
      '@nestjs/platform-express': '^12.0.0',
      '@nestjs/schedule': '^12.0.0',
    },
  },
  {
    name: 'Nest 11, CommonJS',
    type: 'commonjs',
    nest: '11.',
    dependencies: {
      '@nestjs/common': '^11.0.0',
      '@nestjs/core': '^11.0.0',
      '@nestjs/platform-express': '^11.0.0',
      '@nestjs/schedule': '^6.0.0',
    },
  },
];

/** A project whose only Redis client is node-redis: ioredis is never installed, so never loaded. */
const nodeRedisConsumer: Consumer = {
  name: 'Nest 12, ESM, node-redis only',
  type: 'module',
  nest: '12.',
  dependencies: { '@nestjs/common': '^12.0.0', '@nestjs/core': '^12.0.0' },
  main: 'main-node-redis.ts',
  redisClient: { redis: '^6.0.0' },
};

interface Outcome {
  nest: string;
  statuses: number[];
  runs: number;
  maxRunsInOneSecond: number;
  instances: string[];
  testingEntry: string;
  ormEntry: string;
  conformance: { checks: number; passed: number; failed: string[] };
  sample: { failed: string[]; skipped: string[] };
  board: string[];
}

describe('the packed tarball, installed into throwaway Nest projects', () => {
  let work: string;
  let tarball: string;
  let files: string[];
  const prepared = new Map<string, Promise<string>>();

  /** npm install the tarball and Nest into a fresh directory, then compile main.ts with tsc. */
  async function prepare(consumer: Consumer): Promise<string> {
    const dir = join(work, consumer.main ? consumer.main.replace(/\.ts$/, '') : consumer.type);
    mkdirSync(join(dir, 'src'), { recursive: true });
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({
        name: `consumer-${consumer.type}`,
        private: true,
        type: consumer.type,
        dependencies: {
          'nest-distributed-lock': `file:${tarball}`,
          ...consumer.dependencies,
          ...(consumer.redisClient ?? { ioredis: '^6.0.0' }),
          'reflect-metadata': '^0.2.0',
          rxjs: '^7.8.0',
          '@types/node': '^20.19.0',
        },
      }),
    );
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          experimentalDecorators: true,
          emitDecoratorMetadata: true,
          strict: true,
          skipLibCheck: true,
          rootDir: 'src',
          outDir: 'dist',
          types: ['node'],
        },
        include: ['src'],
      }),
    );
    cpSync(join(root, 'test/package/consumer', consumer.main ?? 'main.ts'), join(dir, 'src/main.ts'));
    if (!consumer.main) cpSync(join(root, 'docs/samples/simple-redis.backend.ts'), join(dir, 'src/simple-redis.backend.ts'));
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
      cwd: dir,
      timeout: 240_000,
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    await run(process.execPath, [tsc, '-p', '.'], { cwd: dir, timeout: 120_000 }).catch((error: { stdout?: string }) => {
      throw new Error(`tsc failed in the ${consumer.name} project:\n${error.stdout ?? error}`);
    });
    return dir;
  }

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ndl-pack-'));
    // Packed from a copy of the checkout's sources (its node_modules linked): the build writes dist/
    // there, never into the checkout, where the demo spec builds dist/ at the same time in another
    // worker (two builds writing one folder, and npm pack reading it, while the other still writes).
    const source = join(work, 'source');
    mkdirSync(source);
    for (const entry of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'lib', 'README.md', 'CHANGELOG.md', 'LICENSE']) {
      cpSync(join(root, entry), join(source, entry), { recursive: true });
    }
    symlinkSync(join(root, 'node_modules'), join(source, 'node_modules'), 'dir');
    // `npm pack` runs the prepack script (npm run build) first, as a publish would.
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work, '--loglevel=error'], {
      cwd: source,
      timeout: 120_000,
      env: { ...process.env, NODE_OPTIONS: '' },
    });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf('['))) as Array<{ filename: string; files: Array<{ path: string }> }>;
    tarball = join(work, packed.filename);
    files = packed.files.map((f) => f.path);
    for (const consumer of [...consumers, nodeRedisConsumer]) {
      const pending = prepare(consumer);
      pending.catch(() => undefined); // awaited by its test
      prepared.set(consumer.name, pending);
    }
  }, 180_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('holds only what a user needs: the built entries with their types, README, CHANGELOG, LICENSE and package.json', () => {
    for (const needed of ['dist/lib/index.js', 'dist/lib/index.d.ts', 'dist/lib/testing/index.js', 'dist/lib/testing/index.d.ts', 'dist/lib/board/index.js', 'dist/lib/board/index.d.ts', 'dist/lib/orm/index.js', 'dist/lib/orm/index.d.ts', 'README.md', 'CHANGELOG.md', 'LICENSE', 'package.json']) {
      expect(files).toContain(needed);
    }
    const strays = files.filter(
      (f) => !['README.md', 'CHANGELOG.md', 'LICENSE', 'package.json'].includes(f) && !/^dist\/lib\/.+\.(js|d\.ts)$/.test(f),
    );
    expect(strays).toEqual([]);
    expect(files.filter((f) => /\.spec\.|\/test\/|bench|sample-app/.test(f))).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    expect(Object.keys(manifest.exports)).toEqual(expect.arrayContaining(['.', './testing', './board', './orm']));
    expect(manifest.exports['./testing'].types).toBe('./dist/lib/testing/index.d.ts');
    expect(manifest.exports['./board'].types).toBe('./dist/lib/board/index.d.ts');
    expect(manifest.exports['./orm'].types).toBe('./dist/lib/orm/index.d.ts');
    // The Node lines it runs on (20.19+, 22, 24, 26: `npm run test:node` runs the suite on each), this one among them.
    expect(manifest.engines.node).toBe('>=20.19');
    const [major, minor] = process.versions.node.split('.').map(Number);
    expect(major! > 20 || (major === 20 && minor! >= 19)).toBe(true);
    // Every Redis client is an optional peer: a user installs the one they use.
    for (const client of ['ioredis', 'iovalkey', 'redis']) {
      expect(manifest.peerDependencies[client]).toBeDefined();
      expect(manifest.peerDependenciesMeta[client]).toEqual({ optional: true });
    }
  });

  it('a project with node-redis only (no ioredis installed): the decorator and the service on its client, left open', async () => {
    const dir = await prepared.get(nodeRedisConsumer.name)!;
    const { stdout } = await run(process.execPath, ['dist/main.js'], { cwd: dir, timeout: 60_000, env: { ...process.env, NODE_OPTIONS: '', REDIS_URL: redisUrl() } });
    expect(JSON.parse(stdout.trim().split('\n').pop()!)).toEqual({ runs: 6, most: 1, busy: true, clientOpen: true, ping: 'PONG', ioredis: 'not installed' });
  }, 300_000);

  it("publishes the service's documented API only: no internal member in its .d.ts", async () => {
    await run('tar', ['-xzf', tarball, '-C', work, 'package/dist/lib/distributed-lock.service.d.ts']);
    const dts = readFileSync(join(work, 'package/dist/lib/distributed-lock.service.d.ts'), 'utf8');
    const body = dts.slice(dts.indexOf('export declare class DistributedLockService'));
    const members = [...body.matchAll(/^ {4}((?:private )?(?:readonly )?)([A-Za-z]\w*)[(:<;?]/gm)];
    const published = members.filter((m) => !m[1].startsWith('private')).map((m) => m[2]);
    expect(published).toEqual(['events', 'constructor', 'acquire', 'tryAcquire', 'using', 'campaign', 'current', 'inspect', 'forceRelease', 'list', 'currentLeases']);
    // Private fields appear by name only, without their types: nothing a caller can use.
    for (const [line, modifiers] of members.map((m) => [m[0], m[1]])) if (modifiers.startsWith('private')) expect(line).toMatch(/;$/);
    expect(body).not.toMatch(/@internal/);
  });

  it.each(consumers.map((c) => [c.name, c] as const))(
    '%s: compiles, one replica per @Cron tick, a busy controller answers 409, and the testing, board and orm entries work',
    async (_name, consumer) => {
      const dir = await prepared.get(consumer.name)!;
      const emitted = readFileSync(join(dir, 'dist/main.js'), 'utf8');
      // The CommonJS project really require()s the ESM package (Node ≥ 20.19 loads it synchronously).
      expect(emitted).toMatch(consumer.type === 'commonjs' ? /require\("nest-distributed-lock"\)/ : /from 'nest-distributed-lock'/);
      const { stdout } = await run(process.execPath, ['dist/main.js'], {
        cwd: dir,
        timeout: 60_000,
        env: { ...process.env, NODE_OPTIONS: '', REDIS_URL: redisUrl() },
      });
      const outcome = JSON.parse(stdout.trim().split('\n').pop()!) as Outcome;
      expect(outcome.nest.startsWith(consumer.nest)).toBe(true);
      expect(outcome.statuses).toEqual([201, 409]); // two replicas, one lock: the second is refused
      expect(outcome.runs).toBeGreaterThanOrEqual(2); // the job ran on its ticks …
      expect(outcome.maxRunsInOneSecond).toBe(1); // … on one replica per tick
      expect(outcome.testingEntry).toBe('sent'); // busy under occupy(), runs once released
      expect(outcome.ormEntry).toBe('InvalidLockOptionsError:db'); // the orm entry, without any ORM installed
    // verifyLockBackend ships in the testing entry: on MemoryBackend every check it claims passes.
    expect(outcome.conformance.failed).toEqual([]);
    expect(outcome.conformance.passed).toBeGreaterThan(outcome.conformance.checks / 2);
    // The sample of docs/backends/writing-a-backend.md compiles against the published types and keeps what it claims.
    expect(outcome.sample.failed).toEqual([]);
    expect(outcome.sample.skipped).toEqual(['acquire-all-all-or-nothing', 'bookkeeping-drains', 'force-release', 'rw-no-writer-starvation', 'rw-readers-share-writer-alone', 'rw-upgrade-without-window', 'semaphore-admits-at-most-permits', 'semaphore-permits-agree', 'tokens-increase', 'unreachable-bounded', 'waiters-served-in-order']);
      expect(outcome.board).toEqual([expect.stringMatching(/^redis:pkg-\d+-work$/)]); // the board entry lists the held lock
    },
    300_000,
  );
});
