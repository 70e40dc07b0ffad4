// Real servers for tests, on free loopback ports. Plain ESM so both the test runner script and
// the TypeScript specs can use it. Every process started here is recorded by PID and killed by
// PID only — never by name.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const started = new Set();
process.on('exit', () => {
  for (const child of started) {
    try {
      child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

/** A free TCP port on 127.0.0.1 (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const PACKAGES = {
  'redis-server': { debian: 'redis-server', brew: 'redis' },
  etcd: { debian: 'etcd-server etcd-client', brew: 'etcd' },
};

function which(binary) {
  const found = spawnSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

/**
 * Path of a server binary. Missing: installed with apt-get when running as root where apt-get
 * exists; otherwise an error naming the package to install.
 */
export function ensureBinary(binary) {
  const existing = which(binary);
  if (existing) return existing;
  const pkg = PACKAGES[binary] ?? { debian: binary, brew: binary };
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot && which('apt-get')) {
    console.error(`[harness] ${binary} not found: installing Debian package(s) ${pkg.debian} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    const opts = { stdio: 'inherit', env };
    let result = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...pkg.debian.split(' ')], opts);
    if (result.status !== 0) {
      spawnSync('apt-get', ['update'], opts);
      result = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', ...pkg.debian.split(' ')], opts);
    }
    const installed = which(binary);
    if (result.status === 0 && installed) return installed;
  }
  throw new Error(
    `${binary} is needed by the tests and was not found on PATH. Install it: ` +
      `Debian/Ubuntu "sudo apt-get install ${pkg.debian}", macOS "brew install ${pkg.brew}".`,
  );
}

/** Resolve once `port` answers a Redis PING, or reject after `timeoutMs`. */
async function waitForRedis(port, timeoutMs, child) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with code ${child.exitCode}`);
    const ok = await new Promise((resolve) => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      socket.setTimeout(200);
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.on('error', () => resolve(false));
      socket.on('timeout', () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`redis-server on port ${port} did not answer PING within ${timeoutMs} ms`);
}

/** A redis-server process the test run owns. */
export class RedisServer {
  /**
   * @param {{ port?: number, appendonly?: boolean }} [options]
   *   appendonly: true keeps keys across kill -9 (appendfsync always); false (default) loses them.
   *   cluster: start in cluster mode (slots still to be assigned: see assignAllSlots in the specs).
   */
  static async start(options = {}) {
    const server = new RedisServer(options.port ?? (await freePort()), options.appendonly ?? false, options.cluster ?? false);
    await server.launch();
    return server;
  }

  constructor(port, appendonly, cluster) {
    this.port = port;
    this.appendonly = appendonly;
    this.cluster = cluster;
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-redis-'));
    this.binary = ensureBinary('redis-server');
    this.child = undefined;
  }

  get url() {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid() {
    return this.child?.pid;
  }

  async launch() {
    if (this.sentinelOf !== undefined) return this.launchWith([this.writeSentinelConfig(), '--sentinel']);
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--dir', this.dir, '--daemonize', 'no'];
    args.push(...(this.appendonly ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']));
    if (this.cluster) {
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', path.join(this.dir, 'nodes.conf'), '--cluster-announce-ip', '127.0.0.1');
    }
    return this.launchWith(args);
  }

  async launchWith(args) {
    const child = spawn(this.binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    started.add(child);
    child.once('exit', () => started.delete(child));
    this.child = child;
    try {
      await waitForRedis(this.port, 10_000, child);
    } catch (error) {
      child.kill('SIGKILL');
      throw new Error(`${error.message}${stderr ? `: ${stderr.trim()}` : ''}`);
    }
  }

  /** A Sentinel (redis-server --sentinel) monitoring `master` as "mymaster" with quorum 1. */
  static async startSentinel(master) {
    const server = new RedisServer(await freePort(), false, false);
    server.sentinelOf = master;
    await server.launch();
    return server;
  }

  writeSentinelConfig() {
    const file = path.join(this.dir, 'sentinel.conf');
    writeFileSync(
      file,
      [
        `port ${this.port}`,
        'bind 127.0.0.1',
        `dir ${this.dir}`,
        `sentinel monitor mymaster 127.0.0.1 ${this.sentinelOf.port} 1`,
        'sentinel down-after-milliseconds mymaster 1000',
        '',
      ].join('\n'),
    );
    return file;
  }

  /** kill -9: no shutdown, no save. Resolves when the process is gone. */
  async kill9() {
    await this.signal('SIGKILL');
  }

  /** Start again on the same port and data dir. */
  async restart() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) await this.kill9();
    await this.launch();
  }

  /** Pause / resume the server process (it stops answering but keeps its sockets open). */
  pause() {
    this.child?.kill('SIGSTOP');
  }

  resume() {
    this.child?.kill('SIGCONT');
  }

  async stop() {
    await this.signal('SIGKILL');
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }

  async signal(sig) {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill(sig);
    await exited;
  }
}
