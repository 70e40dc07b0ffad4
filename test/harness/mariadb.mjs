// A MariaDB server the test run owns (issue 38): mariadb-install-db in a temp dir, mariadbd
// started on a free loopback port with its own socket, stopped (and its directory removed)
// afterwards. A machine may already run a MariaDB on 3306: never used. mariadbd refuses to run
// as root, so when the run is root the server runs as the `mysql` user. Killed by PID only.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { aptInstall, freePort, waitForAnswer } from './servers.mjs';
import { reapWithUs } from './reaper.mjs';

function which(binary) {
  const found = spawnSync('sh', ['-c', `command -v ${binary}`], { encoding: 'utf8' });
  if (found.status === 0) return found.stdout.trim();
  for (const dir of ['/usr/sbin', '/usr/bin']) if (existsSync(path.join(dir, binary))) return path.join(dir, binary);
  return undefined;
}

/** mariadb-install-db and mariadbd (installed with apt-get when root and missing; else an error naming the package). */
export function ensureMariaDb() {
  let install = which('mariadb-install-db');
  let server = which('mariadbd');
  if ((!install || !server) && process.getuid?.() === 0) {
    console.error('[harness] MariaDB not found: installing Debian package mariadb-server with apt-get');
    if (aptInstall(['mariadb-server'])) {
      install = which('mariadb-install-db');
      server = which('mariadbd');
    }
  }
  if (!install || !server) {
    throw new Error('MariaDB (mariadb-install-db, mariadbd) is needed by the tests. Install it: Debian/Ubuntu "sudo apt-get install mariadb-server", macOS "brew install mariadb".');
  }
  return { install, server };
}

function runAs() {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(spawnSync('id', ['-u', 'mysql'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'mysql'], { encoding: 'utf8' }).stdout.trim());
  if (!Number.isInteger(uid) || Number.isNaN(uid)) throw new Error('running as root, but there is no "mysql" user to run MariaDB as');
  return { uid, gid, user: 'mysql' };
}

/** NDL_MARIADB_TEMPLATE: a data directory `npm test` installed once (see makeMariaDbTemplate), copied for each server. */
const TEMPLATE_ENV = 'NDL_MARIADB_TEMPLATE';

/** A fresh data directory at `data`: a copy of the run's template when there is one (0.3 s), else mariadb-install-db (~1.6 s). */
function installData(bins, owner, data, tmp) {
  const template = process.env[TEMPLATE_ENV];
  if (template && existsSync(path.join(template, 'mysql'))) {
    // cp -a keeps the owner (mysql, when root). The template's server shut down cleanly after its install.
    const copy = spawnSync('cp', ['-a', template, data], { encoding: 'utf8' });
    if (copy.status === 0) return;
    throw new Error(`copying the MariaDB template ${template} failed: ${copy.stderr}`);
  }
  // root@localhost with no password over TCP (not the unix_socket plugin), no test database.
  const init = spawnSync(
    bins.install,
    ['--no-defaults', `--datadir=${data}`, `--tmpdir=${tmp}`, '--auth-root-authentication-method=normal', '--skip-test-db', '--skip-name-resolve', ...(owner.user ? [`--user=${owner.user}`] : [])],
    { encoding: 'utf8' },
  );
  if (init.status !== 0) throw new Error(`mariadb-install-db failed: ${init.stdout}\n${init.stderr}`);
}

/**
 * One mariadb-install-db for the whole test run: a data directory every MariaDbServer.start() of
 * the run's processes copies (through NDL_MARIADB_TEMPLATE in their environment). Returns the
 * variables to set, and a function that removes the template.
 */
export function makeMariaDbTemplate() {
  const bins = ensureMariaDb();
  const owner = runAs();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-mariadb-template-'));
  if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid);
  const tmp = path.join(dir, 'tmp');
  mkdirSync(tmp);
  if (owner.uid !== undefined) chownSync(tmp, owner.uid, owner.gid);
  const data = path.join(dir, 'data');
  const saved = process.env[TEMPLATE_ENV];
  delete process.env[TEMPLATE_ENV];
  try {
    installData(bins, owner, data, tmp);
  } finally {
    if (saved !== undefined) process.env[TEMPLATE_ENV] = saved;
  }
  return { env: { [TEMPLATE_ENV]: data }, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export class MariaDbServer {
  static async start() {
    const bins = ensureMariaDb();
    const owner = runAs();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-mariadb-'));
    if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid);
    const data = path.join(dir, 'data');
    // A temporary directory of its own: a starting server deletes every '#sql*' file it finds in
    // its tmpdir, and with the default /tmp one server's start removed another's temporary tables
    // (concurrent mariadb-install-db runs failed 2 to 4 times in 10: "Unknown table
    // 'mysql.tmp_user_sys'"). Never the machine's my.cnf either (--no-defaults comes first).
    const tmp = path.join(dir, 'tmp');
    mkdirSync(tmp);
    if (owner.uid !== undefined) chownSync(tmp, owner.uid, owner.gid);
    installData(bins, owner, data, tmp);
    const port = await freePort();
    const server = new MariaDbServer(dir, port);
    await server.launch();
    return server;
  }

  constructor(dir, port) {
    this.dir = dir;
    this.host = '127.0.0.1';
    this.port = port;
    this.user = 'root';
    this.database = 'mysql';
    this.child = undefined;
  }

  /** A connection string for mysql2 (`createPool(uri)`). */
  get url() {
    return `mysql://${this.user}@${this.host}:${this.port}/${this.database}`;
  }

  /** Start mariadbd on this server's data directory and port; resolves when it sends a handshake. */
  async launch() {
    const bins = ensureMariaDb();
    const owner = runAs();
    const child = spawn(
      bins.server,
      [
        '--no-defaults', // never the machine's /etc/mysql configuration (its port, socket, datadir)
        `--datadir=${path.join(this.dir, 'data')}`,
        `--tmpdir=${path.join(this.dir, 'tmp')}`,
        `--socket=${path.join(this.dir, 'mysqld.sock')}`,
        `--pid-file=${path.join(this.dir, 'mysqld.pid')}`,
        `--port=${this.port}`,
        '--bind-address=127.0.0.1',
        '--skip-name-resolve',
        '--innodb-flush-log-at-trx-commit=2', // the tests kill -9 the server: the log still replays
        '--max-connections=200',
        ...(owner.user ? [`--user=${owner.user}`] : []),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child = child;
    reapWithUs(child);
    let stderr = '';
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    if (!MariaDbServer.exitHooked) {
      MariaDbServer.exitHooked = true;
      process.on('exit', () => {
        for (const server of MariaDbServer.running) server.child?.kill('SIGKILL');
      });
    }
    MariaDbServer.running.add(this);
    // MySQL's protocol: the server speaks first (a handshake packet: length, sequence, protocol 10, …).
    await waitForAnswer(this.port, 30_000, child, { what: 'mariadbd', ready: (data) => data.length > 4, detail: () => stderr });
  }

  /** A clean shutdown (SIGTERM), then the same data on the same port. */
  async restart() {
    await this.halt('SIGTERM');
    await this.launch();
  }

  /** kill -9: no shutdown; `launch()` brings it back through InnoDB's crash recovery. */
  async kill() {
    await this.halt('SIGKILL');
  }

  /**
   * SIGSTOP of the server process (answers stop; connections stay open), resolving once every
   * thread of it is stopped. mariadbd has many threads: the kernel hands the stop to one of them,
   * and the group stops only when that thread runs — under CPU load, hundreds of ms during which
   * the others kept answering (measured: 45 of 60 queries answered right after SIGSTOP with three
   * CPU-bound processes beside it). Polls /proc for at most 5 s.
   */
  async pause() {
    const child = this.child;
    if (!child) return;
    child.kill('SIGSTOP');
    const stopped = () => {
      try {
        return readdirSync(`/proc/${child.pid}/task`).every((tid) => {
          const stat = readFileSync(`/proc/${child.pid}/task/${tid}/stat`, 'utf8');
          return /^[tT]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
        });
      } catch {
        return true; // gone
      }
    };
    for (const until = Date.now() + 5_000; !stopped() && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  resume() {
    this.child?.kill('SIGCONT');
  }

  async halt(signal) {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGCONT'); // a paused server cannot act on SIGTERM
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    MariaDbServer.running.delete(this);
  }

  async stop() {
    await this.halt('SIGTERM');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

MariaDbServer.running = new Set();
MariaDbServer.exitHooked = false;
