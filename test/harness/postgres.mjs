// A PostgreSQL server the test run owns: initdb in a temp dir, started on a free loopback port,
// stopped (and its directory removed) afterwards. PostgreSQL refuses to run as root, so when
// the run is root the server runs as the `postgres` user. Killed by PID only.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { aptInstall, freePort } from './servers.mjs';
import { reapWithUs } from './reaper.mjs';

function findPgBin(name) {
  const onPath = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  if (onPath.status === 0) return onPath.stdout.trim();
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    for (const version of readdirSync(root).sort().reverse()) {
      const candidate = path.join(root, version, 'bin', name);
      if (existsSync(candidate)) return candidate;
    }
  }
  return undefined;
}

/** initdb and postgres of a PostgreSQL installation (installed with apt-get when root and missing; else an error naming the package). */
export function ensurePg() {
  let initdb = findPgBin('initdb');
  const isRoot = process.getuid?.() === 0;
  if (!initdb && isRoot) {
    console.error('[harness] PostgreSQL not found: installing Debian package postgresql with apt-get');
    if (aptInstall(['postgresql'])) initdb = findPgBin('initdb');
  }
  if (!initdb) {
    throw new Error('PostgreSQL (initdb, postgres) is needed by the tests. Install it: Debian/Ubuntu "sudo apt-get install postgresql", macOS "brew install postgresql", or set PGHOST/PGPORT/PGUSER/PGDATABASE to a server to use.');
  }
  return { initdb, postgres: path.join(path.dirname(initdb), 'postgres') };
}

function runAs() {
  if (process.getuid?.() !== 0) return {};
  const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
  if (!Number.isInteger(uid) || Number.isNaN(uid)) throw new Error('running as root, but there is no "postgres" user to run PostgreSQL as');
  return { uid, gid };
}

/** NDL_PG_TEMPLATE: a data directory `npm test` made once with initdb (see makePgTemplate), copied for each server. */
const TEMPLATE_ENV = 'NDL_PG_TEMPLATE';

/** A fresh data directory at `data`: a copy of the run's template when there is one (0.1 s), else initdb (~1.5 s of CPU). */
function initData(bins, owner, data) {
  const template = process.env[TEMPLATE_ENV];
  if (template && existsSync(path.join(template, 'PG_VERSION'))) {
    // cp -a keeps the owner (postgres, when root) and the 0700 mode PostgreSQL insists on.
    const copy = spawnSync('cp', ['-a', template, data], { encoding: 'utf8' });
    if (copy.status === 0) return;
    throw new Error(`copying the PostgreSQL template ${template} failed: ${copy.stderr}`);
  }
  const init = spawnSync(bins.initdb, ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'], { ...owner, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr || init.stdout}`);
}

/**
 * One initdb for the whole test run: a data directory every PostgresServer.start() of the run's
 * processes copies (through NDL_PG_TEMPLATE in their environment) instead of running initdb again.
 * Returns the variables to set, and a function that removes the template.
 */
export function makePgTemplate() {
  const bins = ensurePg();
  const owner = runAs();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-pg-template-'));
  if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid);
  const data = path.join(dir, 'data');
  const saved = process.env[TEMPLATE_ENV];
  delete process.env[TEMPLATE_ENV];
  try {
    initData(bins, owner, data);
  } finally {
    if (saved !== undefined) process.env[TEMPLATE_ENV] = saved;
  }
  return { env: { [TEMPLATE_ENV]: data }, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export class PostgresServer {
  /** Connection settings for `pg`: the servers' own unless PG* variables point at one. */
  static fromEnv() {
    if (!process.env.PGHOST) return undefined;
    return {
      host: process.env.PGHOST,
      port: Number(process.env.PGPORT ?? 5432),
      user: process.env.PGUSER ?? 'postgres',
      database: process.env.PGDATABASE ?? 'postgres',
      password: process.env.PGPASSWORD,
      stop: async () => undefined,
    };
  }

  static async start() {
    const bins = ensurePg();
    const owner = runAs();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-pg-'));
    if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid);
    const data = path.join(dir, 'data');
    initData(bins, owner, data);
    const port = await freePort();
    const server = new PostgresServer(null, dir, port);
    await server.launch();
    return server;
  }

  /**
   * Start the postgres process on this server's data directory and port; resolves when it accepts
   * connections. Right after a kill -9 of the postmaster its backends may still be exiting (on a
   * loaded machine): PostgreSQL then refuses to start ("pre-existing shared memory block is still
   * in use"), and we try again for up to 10 s.
   */
  async launch() {
    const until = Date.now() + 10_000;
    for (;;) {
      try {
        return await this.launchOnce();
      } catch (error) {
        if (!/pre-existing shared memory block/.test(String(error?.message)) || Date.now() > until) throw error;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  async launchOnce() {
    const bins = ensurePg();
    const owner = runAs();
    const data = path.join(this.dir, 'data');
    const child = spawn(
      bins.postgres,
      ['-D', data, '-p', String(this.port), '-h', '127.0.0.1', '-k', this.dir, '-c', 'fsync=off', '-c', 'max_connections=50'],
      { ...owner, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child = child;
    reapWithUs(child);
    let stderr = '';
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    if (!PostgresServer.exitHooked) {
      PostgresServer.exitHooked = true;
      process.on('exit', () => {
        for (const server of PostgresServer.running) server.child?.kill('SIGKILL');
      });
    }
    PostgresServer.running.add(this);
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`postgres exited with code ${child.exitCode}: ${stderr}`);
      if (stderr.includes('ready to accept connections')) break;
      if (Date.now() > deadline) throw new Error(`postgres not ready within 20 s: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** `pg_ctl -m fast restart`: a fast shutdown (every session ends), then the same data on the same port. */
  async restart() {
    await this.halt('SIGINT');
    await this.launch();
  }

  /** kill -9 of the postmaster (no checkpoint); `launch()` brings it back through crash recovery. */
  async kill() {
    await this.halt('SIGKILL');
  }

  async halt(signal) {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
    PostgresServer.running.delete(this);
  }

  /** A connection string for this server. */
  get url() {
    return `postgres://${this.user}@${this.host}:${this.port}/${this.database}`;
  }

  constructor(child, dir, port) {
    this.child = child;
    this.dir = dir;
    this.host = '127.0.0.1';
    this.port = port;
    this.user = 'postgres';
    this.database = 'postgres';
  }

  async stop() {
    await this.halt('SIGINT');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

PostgresServer.running = new Set();
PostgresServer.exitHooked = false;
