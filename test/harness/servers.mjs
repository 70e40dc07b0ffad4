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
  faketime: { debian: 'faketime', brew: 'libfaketime' },
  // The lock board's browser test drives it with playwright-core: no browser download from elsewhere.
  chromium: { debian: 'chromium', brew: '--cask chromium' },
};

function which(binary) {
  const found = spawnSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

/**
 * `apt-get install` of Debian packages (an `apt-get update` first if the install fails), when
 * running as root where apt-get exists. true when installed.
 */
export function aptInstall(packages) {
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (!isRoot || !which('apt-get')) return false;
  const opts = { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } };
  // Another install may hold dpkg's lock (two specs installing at once): wait for it, bounded.
  const wait = ['-o', 'DPkg::Lock::Timeout=300'];
  let result = spawnSync('apt-get', [...wait, 'install', '-y', '--no-install-recommends', ...packages], opts);
  if (result.status !== 0) {
    spawnSync('apt-get', [...wait, 'update'], opts);
    result = spawnSync('apt-get', [...wait, 'install', '-y', '--no-install-recommends', ...packages], opts);
  }
  return result.status === 0;
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
    const installed = aptInstall(pkg.debian.split(' ')) && which(binary);
    if (installed) return installed;
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
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`redis-server on port ${port} exited (${child.exitCode ?? child.signalCode})`);
    const ok = await new Promise((resolve) => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      socket.setTimeout(200);
      socket.on('connect', () => socket.write('PING\r\n'));
      socket.on('data', (data) => {
        socket.destroy();
        resolve(data.toString().startsWith('+PONG'));
      });
      socket.on('error', () => resolve(false));
      // A server killed after it read the PING closes without answering: try again (it never settled before).
      socket.on('close', () => resolve(false));
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

async function httpJson(url, body, timeoutMs = 1000) {
  const response = await fetch(url, {
    method: body === undefined ? 'GET' : 'POST',
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return response.json();
}

/** One etcd member process the test run owns. */
export class EtcdMember {
  constructor(name, clientPort, peerPort, dir, tuning) {
    this.name = name;
    this.clientPort = clientPort;
    this.peerPort = peerPort;
    this.dir = dir;
    this.tuning = tuning;
    this.binary = ensureBinary('etcd');
    this.child = undefined;
    this.initialCluster = undefined;
  }

  get endpoint() {
    return `127.0.0.1:${this.clientPort}`;
  }

  get url() {
    return `http://127.0.0.1:${this.clientPort}`;
  }

  get pid() {
    return this.child?.pid;
  }

  get running() {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  launch(state) {
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const args = [
      '--name', this.name,
      '--data-dir', path.join(this.dir, this.name),
      '--listen-client-urls', this.url,
      '--advertise-client-urls', this.url,
      '--listen-peer-urls', peer,
      '--initial-advertise-peer-urls', peer,
      '--initial-cluster', this.initialCluster,
      '--initial-cluster-state', state,
      '--heartbeat-interval', String(this.tuning.heartbeatMs),
      '--election-timeout', String(this.tuning.electionMs),
      '--log-level', 'error',
    ];
    const child = spawn(this.binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.stderr = '';
    child.stderr.on('data', (d) => (this.stderr = (this.stderr + d).slice(-4000)));
    started.add(child);
    child.once('exit', () => started.delete(child));
    this.child = child;
  }

  /** Member status through etcd's JSON gateway: { leader, header: { member_id } } or undefined. */
  async status() {
    try {
      return await httpJson(`${this.url}/v3/maintenance/status`, {});
    } catch {
      return undefined;
    }
  }

  async isLeader() {
    const status = await this.status();
    return status !== undefined && status.leader !== undefined && status.leader === status.header?.member_id;
  }

  async kill9() {
    const child = this.child;
    if (!this.running) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exited;
  }

  /** Start again with the same name, ports and data dir: it rejoins the cluster. */
  async restart() {
    await this.kill9();
    this.launch('existing');
  }

  pause() {
    this.child?.kill('SIGSTOP');
  }

  resume() {
    this.child?.kill('SIGCONT');
  }
}

/**
 * An etcd cluster of `size` members on free loopback ports (1 for most specs, 3 where failover
 * matters). Fast elections by default (heartbeat 50 ms, election 500 ms): leases of 1 s are then
 * honoured as given (etcd raises a lease TTL below 1.5 × election timeout).
 */
export class EtcdCluster {
  static async start(options = {}) {
    const size = options.size ?? 1;
    const tuning = { heartbeatMs: options.heartbeatMs ?? 50, electionMs: options.electionMs ?? 500 };
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-etcd-'));
    const members = [];
    for (let i = 0; i < size; i++) members.push(new EtcdMember(`n${i + 1}`, await freePort(), await freePort(), dir, tuning));
    const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
    const cluster = new EtcdCluster(members, dir);
    for (const member of members) {
      member.initialCluster = initialCluster;
      member.launch('new');
    }
    await cluster.waitHealthy(30_000);
    return cluster;
  }

  constructor(members, dir) {
    this.members = members;
    this.dir = dir;
  }

  /** Client endpoints, for `etcd: { hosts }`. */
  get hosts() {
    return this.members.map((m) => m.endpoint);
  }

  /** Resolve once a leader is elected and every running member answers. */
  async waitHealthy(timeoutMs = 15_000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      for (const member of this.members) {
        if (member.child.exitCode !== null) {
          throw new Error(`etcd member ${member.name} exited with code ${member.child.exitCode}: ${member.stderr}`);
        }
      }
      const statuses = await Promise.all(this.members.filter((m) => m.running).map((m) => m.status()));
      if (statuses.every((s) => s && s.leader && s.leader !== '0')) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`etcd cluster not healthy within ${timeoutMs} ms`);
  }

  /** The member that is currently leader (waits for an election if there is none). */
  async leader(timeoutMs = 10_000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      for (const member of this.members) if (member.running && (await member.isLeader())) return member;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no etcd leader within ${timeoutMs} ms`);
  }

  /** A running member's /metrics counter (summed over label sets), e.g. etcd_disk_wal_fsync_duration_seconds_count. */
  async metric(name) {
    let total = 0;
    for (const member of this.members.filter((m) => m.running)) {
      const text = await (await fetch(`${member.url}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
      for (const line of text.split('\n')) {
        if (line.startsWith(name + ' ') || line.startsWith(name + '{')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
      }
    }
    return total;
  }

  async stop() {
    await Promise.all(this.members.map((m) => m.kill9()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}
