// A PgBouncer the test run owns, in front of a PostgresServer: its own config in a temp dir, on
// a free loopback port, in the pool mode the test asks for. PgBouncer refuses to run as root, so
// when the run is root it runs as the `postgres` user. Killed by PID only.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { aptInstall, freePort } from './servers.mjs';
import { reapWithUs } from './reaper.mjs';

/** The pgbouncer binary (installed with apt-get when root and missing; else an error naming the package). */
export function ensurePgBouncer() {
  const find = () => {
    const r = spawnSync('sh', ['-c', 'command -v pgbouncer || ls /usr/sbin/pgbouncer 2>/dev/null'], { encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim().split('\n')[0] : undefined;
  };
  let bin = find();
  if (!bin) {
    console.error('[harness] pgbouncer not found: installing Debian package pgbouncer with apt-get');
    if (aptInstall(['pgbouncer'])) {
      // The package starts its own service on 6432; ours uses its own port and config.
      spawnSync('sh', ['-c', 'service pgbouncer stop >/dev/null 2>&1 || true']);
      bin = find();
    }
  }
  if (!bin) throw new Error('pgbouncer is needed by the PostgreSQL pooler test. Install it: Debian/Ubuntu "sudo apt-get install pgbouncer".');
  return bin;
}

export class PgBouncer {
  /** `server`: a PostgresServer (host, port, user, database); `mode`: 'transaction' | 'session'. */
  static async start(server, mode) {
    const bin = ensurePgBouncer();
    const isRoot = process.getuid?.() === 0;
    const owner = isRoot
      ? {
          uid: Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim()),
          gid: Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim()),
        }
      : {};
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-pgbouncer-'));
    if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid);
    const port = await freePort();
    const users = path.join(dir, 'users.txt');
    writeFileSync(users, `"${server.user}" ""\n`);
    const ini = path.join(dir, 'pgbouncer.ini');
    writeFileSync(
      ini,
      [
        '[databases]',
        `${server.database} = host=${server.host} port=${server.port} dbname=${server.database}`,
        '[pgbouncer]',
        `listen_addr = 127.0.0.1`,
        `listen_port = ${port}`,
        `unix_socket_dir =`,
        `auth_type = trust`,
        `auth_file = ${users}`,
        `pool_mode = ${mode}`,
        `max_client_conn = 100`,
        `default_pool_size = 10`,
        `logfile = ${path.join(dir, 'pgbouncer.log')}`,
        `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
        '',
      ].join('\n'),
    );
    if (owner.uid !== undefined) for (const f of [users, ini]) chownSync(f, owner.uid, owner.gid);
    const child = spawn(bin, [ini], { ...owner, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    process.on('exit', () => child.kill('SIGKILL'));
    reapWithUs(child);
    const bouncer = new PgBouncer(child, dir, port, server);
    // Ready when it accepts a TCP connection.
    const net = await import('node:net');
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`pgbouncer exited with code ${child.exitCode}: ${stderr}`);
      const open = await new Promise((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
      if (open) break;
      if (Date.now() > deadline) throw new Error(`pgbouncer not listening within 10 s: ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return bouncer;
  }

  constructor(child, dir, port, server) {
    this.child = child;
    this.dir = dir;
    this.port = port;
    this.server = server;
  }

  /** A connection string through the pooler. */
  get url() {
    return `postgres://${this.server.user}@127.0.0.1:${this.port}/${this.server.database}`;
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((resolve) => this.child.once('exit', resolve));
      this.child.kill('SIGINT');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
