// Real servers for tests, on free loopback ports. Plain ESM so both the test runner script and
// the TypeScript specs can use it. Every process started here is recorded by PID and killed by
// PID only — never by name.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { reapWithUs } from './reaper.mjs';

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

/*
 * Ports for the servers the tests start. Not the OS's pick (listen on port 0): that comes from the
 * kernel's ephemeral range, where every listen(0) and every outgoing connection also take theirs,
 * and a port handed out once is free again while its server is killed and kept down. Another jest
 * worker's server (or a Nest app's listen(0)) could take it then, and the restart "started" while
 * the answers came from someone else's server; our own had exited on the taken port (seen: a
 * pingCheck "up" while "our" ZooKeeper was SIGSTOPped — the stop went nowhere).
 *
 * So a port is taken below the ephemeral range and reserved for the life of the process that took
 * it, across every process of every test run on this machine: a file per port in the temp folder,
 * created exclusively, holding the owner's PID. A reservation whose owner is gone is taken over.
 */
const RESERVED_DIR = path.join(os.tmpdir(), 'ndl-test-ports');
const PORT_LOW = 10_000;
const reservedHere = new Set();
process.on('exit', () => {
  for (const file of reservedHere) rmSync(file, { force: true });
});

function ephemeralLow() {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low > PORT_LOW + 2_000) return low;
  } catch {
    /* not Linux: the usual default */
  }
  return 32_768;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

/** Reserve `port` for this process: false if a live process holds it. */
function reserve(port) {
  const file = path.join(RESERVED_DIR, String(port));
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: 'wx' });
      reservedHere.add(file);
      return true;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    let owner;
    try {
      owner = Number(readFileSync(file, 'utf8').trim() || NaN);
    } catch (error) {
      // Its owner removed it between our create and our read (it exited): try again.
      if (error.code === 'ENOENT') continue;
      throw error;
    }
    if (owner === process.pid || !Number.isFinite(owner) || alive(owner)) return false;
    // A dead owner's: rename it away first (only one taker's rename succeeds), then create ours.
    try {
      renameSync(file, `${file}.stale.${process.pid}`);
      rmSync(`${file}.stale.${process.pid}`, { force: true });
    } catch {
      return false;
    }
  }
  return false;
}

function bindable(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that nothing listens on, reserved for this process (see above). */
export async function freePort() {
  mkdirSync(RESERVED_DIR, { recursive: true });
  const high = ephemeralLow();
  for (let tries = 0; tries < 2_000; tries++) {
    const port = PORT_LOW + Math.floor(Math.random() * (high - PORT_LOW));
    if (!reserve(port)) continue;
    if (await bindable(port)) return port;
    // Someone outside the tests listens there: keep it reserved (not ours to hand out) and go on.
  }
  throw new Error(`no free port between ${PORT_LOW} and ${high} after 2,000 tries`);
}

/**
 * Whether the TCP socket listening on `port` belongs to process `pid` (Linux: /proc). Undefined
 * where that cannot be read. A server that "answers" on its port may be another process's: one
 * started on a port already taken exits, but its readiness probe may have been answered first.
 */
export function listensOn(pid, port) {
  let inodes;
  try {
    const hex = port.toString(16).toUpperCase().padStart(4, '0');
    inodes = ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((table) =>
      existsSync(table)
        ? readFileSync(table, 'utf8')
            .split('\n')
            .slice(1)
            .map((line) => line.trim().split(/\s+/))
            .filter((f) => f.length > 9 && f[1].endsWith(`:${hex}`) && f[3] === '0A')
            .map((f) => f[9])
        : [],
    );
    if (!existsSync(`/proc/${pid}/fd`)) return undefined;
    const fds = readdirSync(`/proc/${pid}/fd`);
    return fds.some((fd) => {
      try {
        return inodes.includes(/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? '');
      } catch {
        return false;
      }
    });
  } catch {
    return undefined;
  }
}

/** Throw unless the server on `port` is `child` itself (where the OS lets us tell). */
export function assertOwnListener(child, port, what) {
  if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} on port ${port} exited (${child.exitCode ?? child.signalCode}) after its port answered: another process holds the port`);
  if (listensOn(child.pid, port) === false) throw new Error(`${what} on port ${port}: the port answered, but not from our process (pid ${child.pid}): another process holds it`);
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

/**
 * Resolve once a server on `port` answers as expected — `hello` written on connect (or nothing,
 * for a server that speaks first), then `ready(data)` on what comes back — or reject after
 * `timeoutMs`, or as soon as `child` exits. `what` names the server; `detail()` adds to an error.
 */
export async function waitForAnswer(port, timeoutMs, child, { what, hello, ready, detail = () => '' }) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} on port ${port} exited (${child.exitCode ?? child.signalCode}) ${detail()}`.trim());
    const ok = await new Promise((resolve) => {
      const socket = net.connect({ port, host: '127.0.0.1' });
      socket.setTimeout(300);
      if (hello !== undefined) socket.on('connect', () => socket.write(hello));
      socket.on('data', (data) => {
        socket.destroy();
        resolve(ready(data));
      });
      socket.on('error', () => resolve(false));
      // A server killed after it read the request closes without answering: try again (it never settled before).
      socket.on('close', () => resolve(false));
      socket.on('timeout', () => {
        socket.destroy();
        resolve(false);
      });
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${what} on port ${port} did not answer within ${timeoutMs} ms ${detail()}`.trim());
}

/** Resolve once `port` answers a Redis PING, or reject after `timeoutMs`. */
const waitForRedis = (port, timeoutMs, child) =>
  waitForAnswer(port, timeoutMs, child, { what: 'redis-server', hello: 'PING\r\n', ready: (data) => data.toString().startsWith('+PONG') });

/** A redis-server process the test run owns. */
export class RedisServer {
  /**
   * @param {{ port?: number, appendonly?: boolean }} [options]
   *   appendonly: true keeps keys across kill -9 (appendfsync always); false (default) loses them.
   *   cluster: start in cluster mode (slots still to be assigned: see assignAllSlots in the specs).
   */
  static async start(options = {}) {
    const server = new RedisServer(options.port ?? (await freePort()), options.appendonly ?? false, options.cluster ?? false);
    // Cluster mode also listens on a bus port, by default port + 10,000: a port nobody reserved, and
    // for ports above 22,767 one in the ephemeral range that any client socket may hold — the node
    // then exits at start ("Failed listening on port … (cluster), aborting"). Reserve it like the other.
    if (server.cluster) server.busPort = await freePort();
    await server.launch();
    return server;
  }

  constructor(port, appendonly, cluster) {
    this.port = port;
    this.appendonly = appendonly;
    this.cluster = cluster;
    this.busPort = undefined;
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
      args.push('--cluster-enabled', 'yes', '--cluster-config-file', path.join(this.dir, 'nodes.conf'), '--cluster-announce-ip', '127.0.0.1', '--cluster-port', String(this.busPort));
    }
    return this.launchWith(args);
  }

  async launchWith(args) {
    // redis-server logs to stdout: why it stopped at start ("Address already in use") is there.
    const child = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const keep = (d) => (stderr = (stderr + d).slice(-2_000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    started.add(child);
    reapWithUs(child);
    child.once('exit', () => started.delete(child));
    this.child = child;
    try {
      await waitForRedis(this.port, 10_000, child);
      assertOwnListener(child, this.port, 'redis-server');
    } catch (error) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
      throw new Error(`${error.message}${stderr ? `: ${stderr.trim()}` : ''}`);
    }
    // Started: what it logs from now on is not kept (a long-lived server would fill the buffer for nothing).
    child.stdout.removeListener('data', keep);
    child.stderr.removeListener('data', keep);
    child.stdout.resume();
    child.stderr.resume();
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
    if (this.running) await this.kill9();
    await this.launch();
  }

  get running() {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Pause / resume the server process (it stops answering but keeps its sockets open). A server
   * that is not running cannot be paused: a pause that stops nothing would pass for one.
   */
  pause() {
    if (!this.running) throw new Error(`pause(): redis-server on port ${this.port} is not running`);
    this.child.kill('SIGSTOP');
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
      '--log-level', this.tuning.logLevel ?? 'error',
    ];
    const child = spawn(this.binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.stderr = '';
    this.slow ??= [];
    child.stderr.on('data', (d) => {
      this.stderr = (this.stderr + d).slice(-4000);
      // With logLevel 'warn': etcd's own word that it was slow (a disk sync, an apply, a read), kept apart.
      for (const line of String(d).split('\n')) if (/took too long|slow fdatasync|leader failed to send out heartbeat/.test(line)) this.slow.push(line.slice(0, 400));
      if (this.slow.length > 50) this.slow.splice(0, this.slow.length - 50);
    });
    started.add(child);
    reapWithUs(child);
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
    if (!this.running) throw new Error(`pause(): etcd member ${this.name} is not running`);
    this.child.kill('SIGSTOP');
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
    const tuning = { heartbeatMs: options.heartbeatMs ?? 50, electionMs: options.electionMs ?? 500, logLevel: options.logLevel };
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
      if (statuses.every((s) => s && s.leader && s.leader !== '0')) {
        for (const member of this.members.filter((m) => m.running)) assertOwnListener(member.child, member.clientPort, `etcd member ${member.name}`);
        return;
      }
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
