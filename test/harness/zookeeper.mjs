// A ZooKeeper server the test run owns: its own zoo.cfg and data directory in a temp dir, on a free
// loopback port, started with the Debian jar (package zookeeperd, ZooKeeper 3.8) and OpenJDK.
// Recorded and killed by PID only; the data directory survives kill -9 (restart() reuses it).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { aptInstall, assertOwnListener, freePort } from './servers.mjs';
import { reapWithUs } from './reaper.mjs';

const JAR = '/usr/share/java/zookeeper.jar';
const started = new Set();
process.on('exit', () => {
  for (const child of started) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

function which(binary) {
  const found = spawnSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

/**
 * The java binary and the ZooKeeper jar. Missing: installed with apt-get when running as root
 * (zookeeperd, which pulls in a Java runtime when there is none); otherwise an error naming them.
 */
export function ensureZooKeeper() {
  let java = which('java');
  const isRoot = process.getuid?.() === 0;
  if ((!java || !existsSync(JAR)) && isRoot && which('apt-get')) {
    console.error('[harness] ZooKeeper not found: installing Debian package zookeeperd with apt-get');
    aptInstall(java ? ['zookeeperd'] : ['zookeeperd', 'openjdk-17-jre-headless']);
    java = which('java');
  }
  if (!java || !existsSync(JAR)) {
    throw new Error(
      `ZooKeeper is needed by the tests and was not found (${java ? '' : 'no java on PATH; '}${existsSync(JAR) ? '' : `no ${JAR}`}). ` +
        'Install it: Debian/Ubuntu "sudo apt-get install zookeeperd openjdk-17-jre-headless".',
    );
  }
  return java;
}

/** One four-letter-word command; the answer, or '' when the server does not answer. */
export function fourLetter(port, word, timeoutMs = 500) {
  return new Promise((resolve) => {
    let answer = '';
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.setTimeout(timeoutMs);
    socket.on('connect', () => socket.write(word));
    socket.on('data', (d) => (answer += d));
    socket.on('end', () => resolve(answer));
    socket.on('close', () => resolve(answer));
    socket.on('error', () => resolve(''));
    socket.on('timeout', () => {
      socket.destroy();
      resolve(answer);
    });
  });
}

/** A standalone ZooKeeper process the test run owns. */
export class ZooKeeperServer {
  /** @param {{ tickTimeMs?: number, maxSessionTimeoutMs?: number }} [options] */
  static async start(options = {}) {
    const server = new ZooKeeperServer(await freePort(), options);
    await server.launch();
    return server;
  }

  constructor(port, options) {
    this.port = port;
    this.java = ensureZooKeeper();
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-zk-'));
    this.tickTimeMs = options.tickTimeMs ?? 500;
    this.child = undefined;
    this.configure({ maxSessionTimeoutMs: options.maxSessionTimeoutMs });
  }

  /** Rewrite zoo.cfg (the next launch or restart reads it): `maxSessionTimeoutMs` defaults to 20 ticks. */
  configure({ maxSessionTimeoutMs } = {}) {
    const port = this.port;
    const options = { maxSessionTimeoutMs };
    // Sessions may be 2–20 ticks (1–10 s with the default tick); a client asking for more or less is clamped.
    writeFileSync(
      path.join(this.dir, 'zoo.cfg'),
      [
        `tickTime=${this.tickTimeMs}`,
        `dataDir=${path.join(this.dir, 'data')}`,
        `clientPort=${port}`,
        'clientPortAddress=127.0.0.1',
        `maxSessionTimeout=${options.maxSessionTimeoutMs ?? this.tickTimeMs * 20}`,
        'admin.enableServer=false',
        '4lw.commands.whitelist=ruok,srvr,stat,cons',
        'maxClientCnxns=0',
        // No fsync per write: data still survives kill -9 of the server (the page cache keeps it).
        'forceSync=no',
        '',
      ].join('\n'),
    );
  }

  get connectionString() {
    return `127.0.0.1:${this.port}`;
  }

  get pid() {
    return this.child?.pid;
  }

  get running() {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null;
  }

  async launch() {
    const log4j = path.join(this.dir, 'log4j.properties');
    const logback = path.join(this.dir, 'logback.xml');
    writeFileSync(logback, '<configuration><root level="OFF"/></configuration>\n');
    writeFileSync(log4j, 'log4j.rootLogger=OFF\n');
    const child = spawn(
      this.java,
      [
        '-Xms32m',
        '-Xmx256m',
        '-XX:+UseSerialGC',
        `-Dlogback.configurationFile=${logback}`,
        `-Dlog4j.configuration=file:${log4j}`,
        '-Dzookeeper.jmx.log4j.disable=true',
        '-cp',
        JAR,
        'org.apache.zookeeper.server.quorum.QuorumPeerMain',
        path.join(this.dir, 'zoo.cfg'),
      ],
      // Its own process group: a kill by PID reaches the JVM alone, never our process group.
      { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    started.add(child);
    reapWithUs(child, { group: true });
    child.once('exit', () => started.delete(child));
    this.child = child;
    const deadline = Date.now() + 30_000;
    // `ruok` answers before the server serves: wait for `srvr` to report a mode.
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`ZooKeeper on port ${this.port} exited with code ${child.exitCode}: ${stderr.trim()}`);
      if (/Mode: standalone/.test(await fourLetter(this.port, 'srvr'))) {
        try {
          return assertOwnListener(child, this.port, 'ZooKeeper');
        } catch (error) {
          await this.signal('SIGKILL');
          throw error;
        }
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    await this.signal('SIGKILL');
    throw new Error(`ZooKeeper on port ${this.port} did not start within 30 s: ${stderr.trim()}`);
  }

  /** kill -9: resolves when the process is gone (the data directory stays). */
  async kill9() {
    await this.signal('SIGKILL');
  }

  /** Start again on the same port and data directory. */
  async restart() {
    if (this.running) await this.kill9();
    await this.launch();
  }

  /** SIGSTOP. A server that is not running cannot be paused: a pause that stops nothing would pass for one. */
  pause() {
    if (!this.running) throw new Error(`pause(): ZooKeeper on port ${this.port} is not running`);
    process.kill(this.child.pid, 'SIGSTOP');
  }

  resume() {
    if (this.running) process.kill(this.child.pid, 'SIGCONT');
  }

  async stop() {
    await this.signal('SIGKILL');
    if (existsSync(this.dir)) rmSync(this.dir, { recursive: true, force: true });
  }

  async signal(sig) {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      process.kill(child.pid, 'SIGCONT');
      process.kill(child.pid, sig);
    } catch {
      return;
    }
    await exited;
  }
}
