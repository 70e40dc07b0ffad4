/**
 * Runs one seed: worker processes (each a real Nest app behind its own TCP proxies), the seed's
 * fault schedule, a drain, a liveness probe, then the checker. Servers are shared by the seeds
 * of a batch (every seed has its own key namespace) and started here too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { MariaDbServer } from '../harness/mariadb.mjs';
import { PostgresServer } from '../harness/postgres.mjs';
import { EtcdCluster, RedisServer } from '../harness/servers.mjs';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';
import { check, lockId, type CheckResult, type WorkerEnd } from './checker.js';
import { wallNow } from './clock.js';
import { startInspector, type Inspector } from './inspector.js';
import { DEFAULT_PARAMS, describeFault, faultResource, generatePlan, keyCount, REDLOCK_MASTERS, type Fault, type Plan, type Purpose, type SimParams } from './plan.js';
import { MYSQL_DATABASE, MYSQL_REGISTER_DDL, MYSQL_REGISTER_TABLE, PG_REGISTER_DDL, PG_REGISTER_TABLE, registerName, type RegisterList, type SimEvent, type WorkerCommand, type WorkerConfig } from './protocol.js';

const WORKER = path.resolve('.tmp/compiled/test/simulation/sim-worker.js');
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** A deadline for Promise.race: unref'd, so a race that was won does not keep the process alive. */
const deadline = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

export interface SimServers {
  /** The lock Redis, with appendfsync always: its keys survive kill -9, so a restart must not let a second holder in. */
  lockRedis: RedisServer;
  /** The RedisFence register's Redis (never killed; reached through proxies). */
  registerRedis: RedisServer;
  /** Three members (fast elections); one is killed at a time, so a quorum stays. */
  etcd: EtcdCluster;
  /** The PostgreSQL backend's server, and the PgFence register's (a table in the same database): killed and restarted by the faults. */
  postgres: SimPostgres;
  /** The MySQL backend's MariaDB, and the MySqlFence register's (a table in the same database): killed, restarted, paused by the faults. */
  mysql: SimMySql;
  /** The ZooKeeper backend's server (its leases' register is in etcd): killed and paused by the faults. */
  zookeeper: SimZooKeeper;
  /** The Redlock backend's five independent masters (no persistence): killed and paused by the faults. */
  redlock: SimRedlock;
  stop(): Promise<void>;
}

/** The PostgreSQL server and whether its postmaster runs (a kill -9 fault stops it until relaunched). */
export interface SimPostgres {
  server: PostgresServer;
  up: boolean;
}

/** The MariaDB server, whether mariadbd runs (a kill -9 stops it until relaunched) and whether a fault has it stopped (SIGSTOP). */
export interface SimMySql {
  server: MariaDbServer;
  up: boolean;
  paused: boolean;
}

/** The ZooKeeper server and whether a fault has it stopped (SIGSTOP) right now. */
export interface SimZooKeeper {
  server: ZooKeeperServer;
  paused: boolean;
}

/** The Redlock masters, and which of them a fault has killed (until restarted, empty) or stopped (SIGSTOP) right now. */
export interface SimRedlock {
  masters: RedisServer[];
  down: Set<number>;
  paused: Set<number>;
}

/** One statement on a connection of its own (set-up and seed rows; never through a proxy). */
async function pgQuery(server: PostgresServer, text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: server.url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await client.query(text, values);
  } finally {
    await client.end();
  }
}

/**
 * Launch the postmaster again: after a kill -9 a child may still hold the old shared memory for a
 * moment ("pre-existing shared memory block is still in use"), so a failed launch is tried again
 * (bounded).
 */
async function relaunchPostgres(postgres: SimPostgres): Promise<string> {
  const started = wallNow();
  for (let attempt = 0; ; attempt++) {
    try {
      await postgres.server.launch();
      postgres.up = true;
      return `up ${(wallNow() - started).toFixed(0)} ms after the launch began${attempt > 0 ? `, ${attempt + 1} launches` : ''}`;
    } catch (error) {
      if (attempt >= 10) throw error;
      await sleep(300);
    }
  }
}

/** Statements on a connection of its own (set-up, seed rows, the KILL fault; never through a proxy). */
async function mysqlQuery<T = unknown>(server: MariaDbServer, statements: Array<[string, unknown[]?]>, database = MYSQL_DATABASE): Promise<T[]> {
  const connection = await mysql.createConnection({ host: server.host, port: server.port, user: server.user, database, connectTimeout: 5_000 });
  connection.on('error', () => undefined);
  try {
    const out: T[] = [];
    for (const [text, values] of statements) out.push((await connection.query(text, values))[0] as T);
    return out;
  } finally {
    await connection.end().catch(() => connection.destroy());
  }
}

/** `KILL` of every session of the user but its own; how many there were (one that ended meanwhile is not counted). */
async function killMySqlSessions(server: MariaDbServer): Promise<number> {
  const connection = await mysql.createConnection({ host: server.host, port: server.port, user: server.user, connectTimeout: 5_000 });
  connection.on('error', () => undefined);
  try {
    const [rows] = (await connection.query(
      "SELECT ID AS id FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(USER(), '@', 1) AND ID <> CONNECTION_ID() AND COMMAND <> 'Daemon'",
    )) as [Array<{ id: number | string }>, unknown];
    let killed = 0;
    for (const { id } of rows) {
      // ER_NO_SUCH_THREAD (1094): it ended meanwhile.
      await connection.query(`KILL ${Number(id)}`).then(
        () => (killed += 1),
        (error: { errno?: number }) => {
          if (error.errno !== 1094) throw error;
        },
      );
    }
    return killed;
  } finally {
    await connection.end().catch(() => connection.destroy());
  }
}

/** Launch mariadbd again (after a kill -9: crash recovery), tried again if it fails (bounded). */
async function relaunchMySql(my: SimMySql): Promise<string> {
  const started = wallNow();
  for (let attempt = 0; ; attempt++) {
    try {
      await my.server.launch();
      my.up = true;
      return `up ${(wallNow() - started).toFixed(0)} ms after the launch began${attempt > 0 ? `, ${attempt + 1} launches` : ''}`;
    } catch (error) {
      if (attempt >= 10) throw error;
      await sleep(300);
    }
  }
}

/** MariaDB running and not stopped (a fault may have left it killed or paused). */
async function healMySql(my: SimMySql): Promise<void> {
  if (my.paused) {
    my.server.resume();
    my.paused = false;
  }
  if (!my.up) await relaunchMySql(my);
}

export async function startSimServers(): Promise<SimServers> {
  const [etcd, lockRedis, registerRedis, pgServer, myServer, zkServer, masters] = await Promise.all([
    EtcdCluster.start({ size: 3 }),
    RedisServer.start({ appendonly: true }),
    RedisServer.start(),
    PostgresServer.start(),
    MariaDbServer.start(),
    // Ticks of 500 ms: sessions of 1–10 s (the plan's are 2–3 s).
    ZooKeeperServer.start({ tickTimeMs: 500 }),
    // No appendonly: a killed master comes back empty (the faults keep it out past the longest ttl).
    Promise.all(Array.from({ length: REDLOCK_MASTERS }, () => RedisServer.start())),
  ]);
  const postgres: SimPostgres = { server: pgServer, up: true };
  const my: SimMySql = { server: myServer, up: true, paused: false };
  const zookeeper: SimZooKeeper = { server: zkServer, paused: false };
  const redlock: SimRedlock = { masters, down: new Set(), paused: new Set() };
  await pgQuery(pgServer, PG_REGISTER_DDL);
  await mysqlQuery(myServer, [[`CREATE DATABASE IF NOT EXISTS ${MYSQL_DATABASE}`]], 'mysql');
  await mysqlQuery(myServer, [[MYSQL_REGISTER_DDL]]);
  return {
    etcd,
    lockRedis,
    registerRedis,
    postgres,
    mysql: my,
    zookeeper,
    redlock,
    stop: async () => {
      await Promise.all([etcd.stop(), lockRedis.stop(), registerRedis.stop(), pgServer.stop(), myServer.stop(), zkServer.stop(), ...masters.map((m) => m.stop())]);
    },
  };
}

export interface FaultRecord {
  index: number;
  kind: Fault['kind'] | 'end-crash';
  description: string;
  start?: number;
  end?: number;
  worker?: number;
  skipped?: string;
}

export interface SeedResult {
  seed: number;
  params: SimParams;
  runId: string;
  elapsedMs: number;
  result: CheckResult;
  faults: FaultRecord[];
  replay: string;
  events: SimEvent[];
  plan: Plan;
  /** Set when the run itself broke (not an invariant): a worker would not start, a server would not come back. */
  error?: string;
}

/** The command that replays a seed with the same plan. */
export function replayCommand(params: SimParams): string {
  const args = [`--seed ${params.seed}`];
  if (params.durationMs !== DEFAULT_PARAMS.durationMs) args.push(`--duration ${params.durationMs}`);
  if (params.workers !== DEFAULT_PARAMS.workers) args.push(`--workers ${params.workers}`);
  if (params.fibers !== DEFAULT_PARAMS.fibers) args.push(`--fibers ${params.fibers}`);
  if (params.control) args.push(`--control ${params.control}`);
  if (params.faultFilter) args.push(`--faults ${params.faultFilter.length ? params.faultFilter.join(',') : 'none'}`);
  if (params.maxOps !== undefined) args.push(`--max-ops ${params.maxOps}`);
  return `npm run test:simulation -- ${args.join(' ')}`;
}

interface Proc {
  w: number;
  inc: number;
  child: ChildProcess;
  paused: boolean;
  crashed: boolean;
  drained: boolean;
  exit: Promise<{ code: number | null; signal: string | null }>;
  /** The last 4 KB the worker wrote to stderr. */
  stderrTail: () => string;
  ready: Promise<void>;
  drainedP: Promise<void>;
}

interface WorkerProxies {
  redis: TcpProxy;
  register: TcpProxy;
  /** The EtcdFence register's client: its own proxies (the 'register' target), apart from the lock client's. */
  registerEtcd: TcpProxy[];
  etcd: TcpProxy[];
  /** The PostgreSQL backend's pool and LISTEN session (the 'postgres' target). */
  postgres: TcpProxy;
  /** The PgFence register's pool (the 'register' target), to the same server. */
  registerPostgres: TcpProxy;
  /** The MySQL backend's pool and doorbell connection (the 'mysql' target). */
  mysql: TcpProxy;
  /** The MySqlFence register's pool (the 'register' target), to the same server. */
  registerMysql: TcpProxy;
  /** The ZooKeeper backend's client (the 'zookeeper' target). */
  zookeeper: TcpProxy;
  /** The Redlock backend's clients, one per master (the 'redlock' target). */
  redlock: TcpProxy[];
}

const allProxies = (p: WorkerProxies): TcpProxy[] => [p.redis, p.register, ...p.etcd, ...p.registerEtcd, p.postgres, p.registerPostgres, p.mysql, p.registerMysql, p.zookeeper, ...p.redlock];
const pgUrl = (server: PostgresServer, endpoint = `${server.host}:${server.port}`): string => `postgres://${server.user}@${endpoint}/${server.database}`;
const myUrl = (server: MariaDbServer, endpoint = `${server.host}:${server.port}`): string => `mysql://${server.user}@${endpoint}/${MYSQL_DATABASE}`;

export interface RunOptions {
  log?: (line: string) => void;
}

export async function runSeed(params: SimParams, servers: SimServers, options: RunOptions = {}): Promise<SeedResult> {
  const log = options.log ?? (() => undefined);
  const started = wallNow();
  const plan = generatePlan(params);
  const allKeys = keyCount(plan);
  const runId = `s${params.seed}-${Date.now().toString(36)}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ndl-sim-'));
  const events: SimEvent[] = [];
  const faults: FaultRecord[] = plan.faults.map((f) => ({ index: f.index, kind: f.kind, description: describeFault(f), worker: 'worker' in f ? f.worker : undefined }));
  const listeners = new Set<(e: SimEvent) => void>();
  const procs: Proc[] = [];
  const current: Proc[] = [];
  const proxies: WorkerProxies[] = [];
  let error: string | undefined;
  let probeResult: { probes: NonNullable<Parameters<typeof check>[0]['probes']>; registers: Parameters<typeof check>[0]['registers'] } | undefined;
  let tGone = 0;

  const port = (endpoint: string): number => Number(endpoint.split(':').pop());
  const portNames = new Map<number, string>([
    [servers.lockRedis.port, 'lock redis'],
    [servers.registerRedis.port, 'register redis'],
    [servers.postgres.server.port, 'postgres'],
    [servers.mysql.server.port, 'mariadb'],
    [servers.zookeeper.server.port, 'zookeeper'],
  ]);
  for (const m of servers.etcd.members) portNames.set(port(m.endpoint), `etcd ${m.name}`);
  servers.redlock.masters.forEach((m, i) => portNames.set(m.port, `redlock master m${i + 1}`));

  const spawnProc = (config: WorkerConfig): Proc => {
    const file = path.join(dir, `${config.role}-w${config.worker}.${config.incarnation}.json`);
    writeFileSync(file, JSON.stringify(config));
    const child = spawn(process.execPath, [WORKER], {
      env: { ...process.env, NODE_OPTIONS: '', SIM_WORKER_FILE: file },
      // stderr goes on to ours as before, and its last 4 KB stay with the worker: a worker that dies
      // by itself is reported with what it said (a run with its output in a file lost it once).
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    let stderrTail = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      stderrTail = (stderrTail + chunk.toString('utf8')).slice(-4_096);
    });
    let onReady!: () => void;
    let onDrained!: () => void;
    const proc: Proc = {
      w: config.worker,
      inc: config.incarnation,
      child,
      paused: false,
      crashed: false,
      drained: false,
      exit: new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal }))),
      stderrTail: () => stderrTail,
      ready: new Promise<void>((resolve) => (onReady = resolve)),
      drainedP: new Promise<void>((resolve) => (onDrained = resolve)),
    };
    child.on('message', (e: SimEvent) => {
      if (e.ev === 'ready') onReady();
      if (e.ev === 'drained') {
        proc.drained = true;
        onDrained();
      }
      if (e.ev === 'note') log(`  [w${e.w}.${e.inc}] ${e.message}`);
      events.push(e);
      for (const listener of listeners) listener(e);
    });
    child.on('error', () => undefined);
    procs.push(proc);
    return proc;
  };

  const send = (proc: Proc, command: WorkerCommand): void => {
    if (proc.child.connected) proc.child.send(command, () => undefined);
  };

  const alive = (proc: Proc | undefined): proc is Proc => proc !== undefined && proc.child.exitCode === null && proc.child.signalCode === null;

  // The edge fiber's watched multi-key requests go to the watcher (and their answers stop it).
  const watched = new Set<string>();
  if (plan.edge) {
    const { watcher } = plan.edge;
    listeners.add((e) => {
      if (e.ev === 'req' && e.watch) {
        const proc = current[watcher];
        if (!alive(proc) || proc.paused || proc.crashed) return;
        watched.add(e.id);
        const keys = e.keys ?? [e.key];
        send(proc, { cmd: 'watch', id: e.id, key: e.watch.key, purpose: e.purpose, holdMs: e.watch.holdMs, ttl: e.watch.ttl, last: Math.max(...keys), count: keys.length, ...(e.backend ? { backend: e.backend } : {}) });
      } else if ((e.ev === 'grant' || e.ev === 'busy' || e.ev === 'fail') && watched.delete(e.id)) {
        const proc = current[watcher];
        if (alive(proc)) send(proc, { cmd: 'unwatch', id: e.id });
      }
    });
  }

  // Invariant 5, a key held after its app closed: when a worker's app.close() returns, the runner's
  // own app looks who holds every key that app used; one of its owners, twice RECHECK_MS apart, is
  // logged (as the worker's) — excused when a fault on that backend or the worker's way to it
  // overlapped the close (a release that could not get through leaves the key to its ttl, as documented).
  const inspector: Promise<Inspector | undefined> = params.control
    ? Promise.resolve(undefined)
    : startInspector({
        redisUrl: servers.lockRedis.url,
        etcdHosts: servers.etcd.hosts,
        postgresUrl: pgUrl(servers.postgres.server),
        mysqlUrl: myUrl(servers.mysql.server),
        zookeeperConnectionString: servers.zookeeper.server.connectionString,
        redlockUrls: servers.redlock.masters.map((m) => m.url),
        sessionTtlSeconds: plan.sessionTtlSeconds,
      }).catch((e: unknown) => {
        log(`  the runner's inspector app did not start (no check of keys held after a close): ${(e as Error).message}`);
        return undefined;
      });
  const inspections: Promise<void>[] = [];
  let inspectorClosed = false;
  const closeInspector = async (): Promise<void> => {
    if (inspectorClosed) return;
    inspectorClosed = true;
    await Promise.allSettled(inspections);
    await (await inspector)?.close().catch(() => undefined);
  };
  const closingAt = new Map<string, number>();
  const excuse = (w: number, backend: string, from: number, to: number): string | undefined => {
    const server: Record<string, string[]> = { redis: ['redis-kill'], etcd: ['etcd-kill'], postgres: ['pg-kill', 'pg-restart', 'pg-terminate'], mysql: ['my-kill', 'my-restart', 'my-kill-sessions', 'my-pause'], zookeeper: ['zk-kill', 'zk-pause'], redlock: ['redlock-kill', 'redlock-pause'] };
    for (const record of faults) {
      if (record.start === undefined || record.skipped) continue;
      // (Clients reconnect after a server comes back: 1.5 s more.)
      if (record.start > to || (record.end ?? Infinity) + 1_500 < from) continue;
      const fault = plan.faults.find((f) => f.index === record.index);
      if (server[backend]?.includes(record.kind)) return record.description;
      if ((record.kind === 'pause' || record.kind === 'pause-holder' || record.kind === 'worker-crash') && record.worker === w) return record.description;
      if (fault && (fault.kind === 'delay' || fault.kind === 'blackhole') && fault.worker === w && fault.targets.includes(backend as (typeof fault.targets)[number])) return record.description;
    }
    return undefined;
  };
  const RECHECK_MS = 200;
  const inspectClosed = async (e: Extract<SimEvent, { ev: 'app' }>): Promise<void> => {
    const look = await inspector;
    if (!look || !e.used) return;
    const closedAt = e.t;
    const from = closingAt.get(`${e.w}.${e.inc}`) ?? closedAt;
    let failed = 0;
    const seen: Array<{ backend: string; key: string; owner: string }> = [];
    await Promise.all(
      e.used.map(async ({ backend, key, owners }) => {
        try {
          const held = await look.holder(backend, key);
          if (held?.owner !== undefined && owners.includes(held.owner)) seen.push({ backend, key, owner: held.owner });
        } catch {
          failed += 1;
        }
      }),
    );
    if (seen.length > 0) await sleep(RECHECK_MS);
    await Promise.all(
      seen.map(async ({ backend, key, owner }) => {
        try {
          const held = await look.holder(backend, key);
          if (held?.owner !== owner) return;
          const t = wallNow();
          const excused = excuse(e.w, backend, from, t);
          events.push({ ev: 'closed-held', backend, key, owner, remainingMs: held.remainingMs, closedAt, recheckMs: RECHECK_MS, ...(excused ? { excused } : {}), t, w: e.w, inc: e.inc });
        } catch {
          failed += 1;
        }
      }),
    );
    events.push({ ev: 'close-inspected', keys: e.used.length, failed, closedAt, t: wallNow(), w: e.w, inc: e.inc });
  };
  listeners.add((e) => {
    if (e.ev !== 'app') return;
    if (e.state === 'closing') closingAt.set(`${e.w}.${e.inc}`, e.t);
    if (e.state === 'closed' && !inspectorClosed) inspections.push(inspectClosed(e));
  });

  const workerConfig = (w: number, incarnation: number): WorkerConfig => ({
    role: 'worker',
    worker: w,
    incarnation,
    runId,
    redisUrl: `redis://${proxies[w].redis.endpoint}`,
    redisClient: plan.redisClients[w],
    etcdHosts: proxies[w].etcd.map((p) => p.endpoint),
    registerRedisUrl: `redis://${proxies[w].register.endpoint}`,
    registerEtcdHosts: proxies[w].registerEtcd.map((p) => p.endpoint),
    postgresUrl: pgUrl(servers.postgres.server, proxies[w].postgres.endpoint),
    registerPostgresUrl: pgUrl(servers.postgres.server, proxies[w].registerPostgres.endpoint),
    mysqlUrl: myUrl(servers.mysql.server, proxies[w].mysql.endpoint),
    registerMysqlUrl: myUrl(servers.mysql.server, proxies[w].registerMysql.endpoint),
    zookeeperConnectionString: proxies[w].zookeeper.endpoint,
    redlockUrls: proxies[w].redlock.map((p) => `redis://${p.endpoint}`),
    sessionTtlSeconds: plan.sessionTtlSeconds,
    keys: allKeys,
    fibers: plan.fibers[w],
    decorated: plan.decorated,
    control: params.control,
  });

  const startWorker = async (w: number, incarnation: number): Promise<Proc> => {
    const proc = spawnProc(workerConfig(w, incarnation));
    current[w] = proc;
    const boot = await Promise.race([proc.ready.then(() => 'ready' as const), proc.exit.then(() => 'exit' as const), deadline(45_000).then(() => 'timeout' as const)]);
    if (boot !== 'ready') {
      proc.crashed = true; // not a drain candidate; the fault is recorded as failed
      proc.child.kill('SIGKILL');
      throw new Error(`worker w${w}.${incarnation} did not start (${boot})`);
    }
    return proc;
  };

  const crash = async (proc: Proc): Promise<void> => {
    proc.crashed = true;
    if (!alive(proc)) return;
    proc.child.kill('SIGCONT');
    proc.child.kill('SIGKILL');
    await proc.exit;
  };

  const targetsOf = (w: number, targets: string[]): TcpProxy[] => [
    ...(targets.includes('redis') ? [proxies[w].redis] : []),
    ...(targets.includes('etcd') ? proxies[w].etcd : []),
    ...(targets.includes('postgres') ? [proxies[w].postgres] : []),
    ...(targets.includes('mysql') ? [proxies[w].mysql] : []),
    ...(targets.includes('zookeeper') ? [proxies[w].zookeeper] : []),
    ...(targets.includes('redlock') ? proxies[w].redlock : []),
    ...(targets.includes('register') ? [proxies[w].register, ...proxies[w].registerEtcd, proxies[w].registerPostgres, proxies[w].registerMysql] : []),
  ];

  const pauseProc = async (proc: Proc, ms: number): Promise<void> => {
    proc.child.kill('SIGSTOP');
    proc.paused = true;
    await sleep(ms);
    proc.paused = false;
    if (alive(proc)) proc.child.kill('SIGCONT');
  };

  const injectors: Promise<void>[] = [];
  const runFault = async (fault: Fault & { index: number }, record: FaultRecord): Promise<void> => {
    record.start = wallNow();
    switch (fault.kind) {
      case 'delay':
      case 'blackhole': {
        const targets = targetsOf(fault.worker, fault.targets);
        for (const p of targets) {
          if (fault.kind === 'delay') p.delay(fault.ms);
          else p.blackhole();
        }
        await sleep(fault.dur);
        for (const p of targets) p.heal();
        break;
      }
      case 'pause': {
        const proc = current[fault.worker];
        if (!alive(proc) || proc.paused) {
          record.skipped = 'worker not running';
          break;
        }
        await pauseProc(proc, fault.dur);
        break;
      }
      case 'pause-holder': {
        const w = await new Promise<number | undefined>((resolve) => {
          const timer = setTimeout(() => {
            listeners.delete(listener);
            resolve(undefined);
          }, 4_000);
          const listener = (e: SimEvent): void => {
            if (e.ev !== 'read' || e.result !== 'ok') return;
            const proc = current[e.w];
            if (!alive(proc) || proc.paused || proc.inc !== e.inc) return;
            clearTimeout(timer);
            listeners.delete(listener);
            proc.child.kill('SIGSTOP'); // at once: between its read and its write
            proc.paused = true;
            resolve(e.w);
          };
          listeners.add(listener);
        });
        if (w === undefined) {
          record.skipped = 'no fenced read within 4 s';
          break;
        }
        record.worker = w;
        record.start = wallNow();
        const proc = current[w];
        await sleep(fault.dur);
        proc.paused = false;
        if (alive(proc)) proc.child.kill('SIGCONT');
        break;
      }
      case 'redis-kill':
        try {
          await servers.lockRedis.kill9();
          await sleep(fault.dur);
        } finally {
          await servers.lockRedis.restart();
        }
        break;
      case 'etcd-kill': {
        const member = fault.member === 'leader' ? await servers.etcd.leader() : servers.etcd.members[fault.member];
        record.description += ` (${member.name})`;
        try {
          await member.kill9();
          await sleep(fault.dur);
        } finally {
          await member.restart();
        }
        await servers.etcd.waitHealthy(15_000).catch(() => undefined);
        break;
      }
      case 'pg-kill':
        // The postmaster only, as a crash would: its backends see it gone and exit; the relaunch
        // goes through crash recovery (lease rows, the token sequence and the register survive).
        try {
          servers.postgres.up = false;
          await servers.postgres.server.kill();
          await sleep(fault.dur);
        } finally {
          record.description += ` (${await relaunchPostgres(servers.postgres)})`;
        }
        break;
      case 'pg-terminate': {
        // Every client session ends mid-whatever (57P01), the server and its data stay.
        const r = await pgQuery(
          servers.postgres.server,
          `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
        );
        record.description += ` (${r.rows[0].n as number} sessions)`;
        break;
      }
      case 'pg-restart':
        // Fast shutdown (every session ends), then the same data on the same port at once.
        try {
          servers.postgres.up = false;
          await servers.postgres.server.halt('SIGINT');
        } finally {
          record.description += ` (${await relaunchPostgres(servers.postgres)})`;
        }
        break;
      case 'zk-kill':
        // kill -9 of the JVM; the same data directory on restart (sessions and their ephemeral
        // znodes come back, each session with a fresh timeout from the restart).
        try {
          await servers.zookeeper.server.kill9();
          await sleep(fault.dur);
        } finally {
          const t = wallNow();
          await servers.zookeeper.server.restart();
          record.description += ` (up ${(wallNow() - t).toFixed(0)} ms after the launch began)`;
        }
        break;
      case 'zk-pause':
        // The server stops answering and its session clocks stop being checked; on SIGCONT it
        // expires every session it has not heard from for its timeout.
        servers.zookeeper.paused = true;
        servers.zookeeper.server.pause();
        try {
          await sleep(fault.dur);
        } finally {
          servers.zookeeper.server.resume();
          servers.zookeeper.paused = false;
        }
        break;
      case 'redlock-kill': {
        // kill -9 of these masters at once; back empty (no AOF, no RDB) once the longest ttl and
        // more has passed: the library README's delayed restart, for masters without persistence.
        const masters = fault.masters.map((i) => servers.redlock.masters[i]);
        record.description += ` (ports ${masters.map((m) => m.port).join(', ')})`;
        try {
          for (const i of fault.masters) servers.redlock.down.add(i);
          await Promise.all(masters.map((m) => m.kill9()));
          await sleep(fault.dur);
        } finally {
          await Promise.all(masters.map((m) => m.restart()));
          for (const i of fault.masters) servers.redlock.down.delete(i);
        }
        break;
      }
      case 'redlock-pause': {
        // Stopped, their keys kept: what a holder sent them meanwhile runs when they resume.
        const masters = fault.masters.map((i) => servers.redlock.masters[i]);
        for (const i of fault.masters) servers.redlock.paused.add(i);
        for (const m of masters) m.pause();
        try {
          await sleep(fault.dur);
        } finally {
          for (const m of masters) m.resume();
          for (const i of fault.masters) servers.redlock.paused.delete(i);
        }
        break;
      }
      case 'my-kill':
        // mariadbd only, as a crash would; the relaunch goes through InnoDB's crash recovery (lease
        // rows, the AUTO_INCREMENT the tokens come from and the register survive).
        try {
          servers.mysql.up = false;
          await servers.mysql.server.kill();
          await sleep(fault.dur);
        } finally {
          record.description += ` (${await relaunchMySql(servers.mysql)})`;
        }
        break;
      case 'my-restart':
        // A clean shutdown (every session ends), then the same data on the same port at once.
        try {
          servers.mysql.up = false;
          await servers.mysql.server.halt('SIGTERM');
        } finally {
          record.description += ` (${await relaunchMySql(servers.mysql)})`;
        }
        break;
      case 'my-kill-sessions': {
        // KILL of every session of the user but this one (MySQL's pg_terminate_backend): the
        // pools, the doorbell listeners, open register transactions; the server and its data stay.
        const killed = await killMySqlSessions(servers.mysql.server);
        record.description += ` (${killed} sessions)`;
        break;
      }
      case 'my-pause':
        // The server stops answering; lease expiries are on its clock, which goes on.
        servers.mysql.paused = true;
        await servers.mysql.server.pause();
        try {
          await sleep(fault.dur);
        } finally {
          servers.mysql.server.resume();
          servers.mysql.paused = false;
        }
        break;
      case 'app-restart': {
        const proc = current[fault.worker];
        if (!alive(proc)) {
          record.skipped = 'worker not running';
          break;
        }
        const up = new Promise<void>((resolve) => {
          const listener = (e: SimEvent): void => {
            if (e.ev === 'app' && e.state === 'up' && e.w === proc.w && e.inc === proc.inc) {
              listeners.delete(listener);
              resolve();
            }
          };
          listeners.add(listener);
        });
        send(proc, { cmd: 'close-app', downMs: fault.dur });
        await Promise.race([up, proc.exit, deadline(20_000)]);
        break;
      }
      case 'worker-crash': {
        const proc = current[fault.worker];
        if (!alive(proc)) {
          record.skipped = 'worker not running';
          break;
        }
        await crash(proc);
        await sleep(fault.dur);
        const next = await startWorker(fault.worker, proc.inc + 1);
        send(next, { cmd: 'go' });
        break;
      }
    }
    record.end = wallNow();
  };

  const workerEnds: WorkerEnd[] = [];
  try {
    // This seed's PgFence registers: one row per key, an empty list, fence 0.
    // (And the leader name's, when the seed's leader is on PostgreSQL.)
    const pgRegisters = [...Array.from({ length: plan.keys }, (_, key) => registerName(runId, key, 'postgres')), registerName(runId, 0, 'postgres', 'leader')];
    await pgQuery(servers.postgres.server, `INSERT INTO ${PG_REGISTER_TABLE} (id, v) SELECT unnest($1::text[]), '[]' ON CONFLICT (id) DO NOTHING`, [pgRegisters]);
    // The MySqlFence registers likewise (a MySQL lease writes its own).
    const myRegisters = [...Array.from({ length: plan.keys }, (_, key) => registerName(runId, key, 'mysql')), registerName(runId, 0, 'mysql', 'leader')];
    await mysqlQuery(servers.mysql.server, [[`INSERT IGNORE INTO ${MYSQL_REGISTER_TABLE} (id, v) VALUES ?`, [myRegisters.map((id) => [id, '[]'])]]]);
    for (let w = 0; w < params.workers; w++) {
      const p: WorkerProxies = {
        redis: await TcpProxy.start(servers.lockRedis.port),
        register: await TcpProxy.start(servers.registerRedis.port),
        etcd: await Promise.all(servers.etcd.members.map((m) => TcpProxy.start(port(m.endpoint)))),
        registerEtcd: await Promise.all(servers.etcd.members.map((m) => TcpProxy.start(port(m.endpoint)))),
        postgres: await TcpProxy.start(servers.postgres.server.port),
        registerPostgres: await TcpProxy.start(servers.postgres.server.port),
        mysql: await TcpProxy.start(servers.mysql.server.port),
        registerMysql: await TcpProxy.start(servers.mysql.server.port),
        zookeeper: await TcpProxy.start(servers.zookeeper.server.port),
        redlock: await Promise.all(servers.redlock.masters.map((m) => TcpProxy.start(m.port))),
      };
      proxies.push(p);
      portNames.set(p.redis.port, `w${w}'s proxy to the lock redis`);
      portNames.set(p.register.port, `w${w}'s proxy to the register redis`);
      portNames.set(p.postgres.port, `w${w}'s proxy to postgres (lock backend)`);
      portNames.set(p.registerPostgres.port, `w${w}'s register proxy to postgres (our PgFence pool)`);
      portNames.set(p.mysql.port, `w${w}'s proxy to mariadb (lock backend)`);
      portNames.set(p.registerMysql.port, `w${w}'s register proxy to mariadb (our MySqlFence pool)`);
      portNames.set(p.zookeeper.port, `w${w}'s proxy to zookeeper (lock backend)`);
      p.etcd.forEach((e, i) => portNames.set(e.port, `w${w}'s proxy to etcd n${i + 1}`));
      p.registerEtcd.forEach((e, i) => portNames.set(e.port, `w${w}'s register proxy to etcd n${i + 1} (our EtcdFence client)`));
      p.redlock.forEach((r, i) => portNames.set(r.port, `w${w}'s proxy to redlock master m${i + 1}`));
    }
    await Promise.all(Array.from({ length: params.workers }, (_, w) => startWorker(w, 0)));
    const t0 = wallNow();
    const phase = (name: string): void => log(`  ${name} at +${((wallNow() - started) / 1000).toFixed(1)} s`);
    phase('workers ready');
    log(`seed ${params.seed}: ${params.workers} workers × ${params.fibers} fibers, ${plan.keys} keys, session ttl ${plan.sessionTtlSeconds} s, ${plan.faults.length} faults, ${params.durationMs} ms; Redis clients ${plan.redisClients.join(', ')}`);
    for (const proc of current) send(proc, { cmd: 'go' });
    // One fault per resource at a time in real time too: a fault that ends later than planned (a
    // slow restart) holds the next one on its resource back. Two at once raced on one server — a
    // kill -9 during the previous fault's restart left that restart's readiness probe waiting for
    // good (seed 28: two lock-Redis kills 100 ms apart in the plan).
    const lastOn = new Map<string, Promise<void>>();
    for (const [i, fault] of plan.faults.entries()) {
      const record = faults[i];
      const resource = faultResource(fault);
      const previous = lastOn.get(resource);
      const injected = sleep(Math.max(0, fault.at - (wallNow() - t0)))
        .then(() => previous)
        .then(() =>
          runFault(fault, record)
            .catch((e: unknown) => {
              record.skipped = `failed: ${(e as Error).message}`;
            })
            .then(() => log(`  fault ${record.description}${record.skipped ? ` — skipped: ${record.skipped}` : ''}`)),
        );
      lastOn.set(resource, injected);
      injectors.push(injected);
    }
    await sleep(Math.max(0, params.durationMs - (wallNow() - t0)));
    await Promise.all(injectors);
    phase('operations and faults done');

    // Heal: every proxy passes, every process runs, every server is up.
    for (const p of proxies) for (const proxy of allProxies(p)) proxy.heal();
    for (const proc of current) if (alive(proc)) proc.child.kill('SIGCONT');
    for (const member of servers.etcd.members) if (!member.running) await member.restart();
    await servers.etcd.waitHealthy(20_000);
    if (!servers.postgres.up) await relaunchPostgres(servers.postgres);
    await healMySql(servers.mysql);
    await healZooKeeper(servers.zookeeper);
    await healRedlock(servers.redlock);

    if (plan.endCrash !== undefined && alive(current[plan.endCrash])) {
      faults.push({ index: faults.length, kind: 'end-crash', description: `kill -9 w${plan.endCrash} at the end (it may hold locks)`, worker: plan.endCrash, start: wallNow() });
      await crash(current[plan.endCrash]);
    }

    // Drain: no new operations; finish the running ones; report internal sizes once settled.
    const finishing = current.filter((p) => alive(p) && !p.crashed);
    for (const proc of finishing) send(proc, { cmd: 'drain' });
    await Promise.all(finishing.map((p) => Promise.race([p.drainedP, p.exit, deadline(25_000)])));
    phase('drained');
    for (const proc of finishing) {
      if (proc.drained) send(proc, { cmd: 'exit' });
      else proc.child.kill('SIGKILL');
    }
    await Promise.all(
      finishing.map(async (p) => {
        const timer = setTimeout(() => p.child.kill('SIGKILL'), 12_000);
        await p.exit;
        clearTimeout(timer);
      }),
    );
    for (const proc of procs) {
      if (alive(proc)) await crash(proc);
      const { code, signal } = await proc.exit;
      workerEnds.push({ w: proc.w, inc: proc.inc, how: proc.crashed ? 'crashed' : 'exit', drained: proc.drained, exitCode: code, signal, stderr: proc.stderrTail() });
    }
    await closeInspector();
    tGone = wallNow();
    phase('workers gone');
    await Promise.all(proxies.flatMap(allProxies).map((proxy) => proxy.close()));
    proxies.length = 0;

    // Liveness: a fresh instance, straight to the servers, acquires every lock the run used.
    const bounds = livenessBounds(plan);
    const probeLocks: NonNullable<WorkerConfig['probe']>['locks'] = (['efficiency', 'correctness'] as Purpose[]).flatMap((purpose) =>
      Array.from({ length: allKeys }, (_, key) => ({ key, purpose, boundMs: bounds[`${purpose}:${key}`] })),
    );
    // A key on PostgreSQL, MySQL or ZooKeeper is one lock whatever the purpose: one probe per key; on
    // Redlock too (efficiency only).
    for (const backend of ['postgres', 'mysql', 'zookeeper', 'redlock'] as const) {
      const purpose: Purpose = backend === 'redlock' ? 'efficiency' : 'correctness';
      for (let key = 0; key < allKeys; key++) probeLocks.push({ key, purpose, backend, boundMs: bounds[`${backend}:${key}`] });
    }
    // The seed's semaphore (every permit) and leader name.
    if (plan.primitives) {
      const { sem, leader } = plan.primitives;
      probeLocks.push({ key: 0, purpose: sem.purpose, ns: 'sem', permits: sem.permits, boundMs: bounds[lockId(sem.purpose, 0, sem.backend, 'sem')], ...(sem.backend ? { backend: sem.backend } : {}) });
      probeLocks.push({ key: 0, purpose: leader.purpose, ns: 'leader', boundMs: bounds[lockId(leader.purpose, 0, leader.backend, 'leader')], ...(leader.backend ? { backend: leader.backend } : {}) });
    }
    const probe = spawnProc({
      role: 'probe',
      worker: -1,
      incarnation: 0,
      runId,
      redisUrl: servers.lockRedis.url,
      etcdHosts: servers.etcd.hosts,
      registerRedisUrl: servers.registerRedis.url,
      registerEtcdHosts: servers.etcd.hosts,
      postgresUrl: pgUrl(servers.postgres.server),
      registerPostgresUrl: pgUrl(servers.postgres.server),
      mysqlUrl: myUrl(servers.mysql.server),
      registerMysqlUrl: myUrl(servers.mysql.server),
      zookeeperConnectionString: servers.zookeeper.server.connectionString,
      redlockUrls: servers.redlock.masters.map((m) => m.url),
      sessionTtlSeconds: plan.sessionTtlSeconds,
      keys: allKeys,
      fibers: [],
      decorated: [],
      control: params.control,
      probe: { since: tGone, locks: probeLocks },
    });
    const maxBound = Math.max(...probeLocks.map((l) => l.boundMs));
    const probeEnd = await Promise.race([probe.drainedP.then(() => 'done' as const), probe.exit.then(() => 'exit' as const), deadline(maxBound + 30_000).then(() => 'timeout' as const)]);
    if (alive(probe)) {
      const timer = setTimeout(() => probe.child.kill('SIGKILL'), 5_000);
      await probe.exit;
      clearTimeout(timer);
    }
    phase('probe done');
    if (probeEnd === 'done') {
      const mine = events.filter((e) => e.w === -1);
      probeResult = {
        probes: mine.flatMap((e) => (e.ev === 'probe' ? [{ key: e.key, purpose: e.purpose, backend: e.backend, ns: e.ns, ok: e.ok, elapsedMs: e.elapsedMs, message: e.message }] : [])),
        registers: mine.flatMap((e) => (e.ev === 'register' ? [{ store: e.store, key: e.key, ns: e.ns, list: e.list }] : [])),
      };
    } else {
      error = `the liveness probe did not finish (${probeEnd})`;
    }
  } catch (e) {
    error = (e as Error).stack ?? String(e);
  } finally {
    await Promise.allSettled(injectors);
    await closeInspector();
    for (const proc of procs) if (alive(proc)) await crash(proc);
    await Promise.all(proxies.flatMap(allProxies).map((proxy) => proxy.close().catch(() => undefined)));
    for (const member of servers.etcd.members) if (!member.running) await member.restart();
    if (!servers.postgres.up) await relaunchPostgres(servers.postgres).catch(() => undefined);
    await healMySql(servers.mysql).catch(() => undefined);
    await healZooKeeper(servers.zookeeper).catch(() => undefined);
    await healRedlock(servers.redlock).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }

  const workerEvents = events.filter((e) => e.w >= 0);
  const result = check({
    events: workerEvents,
    registers: probeResult?.registers ?? [],
    probes: probeResult?.probes,
    livenessBoundMs: livenessBounds(plan),
    workers: workerEnds,
    toleranceMs: 1,
    keys: allKeys,
    control: params.control,
    // A worker stopped by SIGSTOP (a pause, the pause of a holder between its read and its write).
    paused: faults.flatMap((f) => ((f.kind === 'pause' || f.kind === 'pause-holder') && f.worker !== undefined && f.start !== undefined && f.end !== undefined && !f.skipped ? [{ w: f.worker, start: f.start, end: f.end }] : [])),
    // MySQL sessions ended without their clients' say (a transaction holder's hold ends there): the
    // server killed, restarted, every session KILLed; a worker killed (its own).
    sessionEnds: faults.flatMap((f) =>
      f.start === undefined || f.skipped
        ? []
        : f.kind === 'my-kill'
          ? [{ at: f.start, why: f.description }]
          : f.kind === 'my-restart' || f.kind === 'my-kill-sessions'
            ? [{ at: f.start, until: f.end ?? f.start, why: f.description }]
          : (f.kind === 'worker-crash' || f.kind === 'end-crash') && f.worker !== undefined
            ? [{ at: f.start, w: f.worker, why: f.description }]
            : [],
    ),
  });
  for (const v of result.violations) v.detail = v.detail.replace(/socket to :(\d+)/g, (all, p: string) => (portNames.has(Number(p)) ? `socket to ${portNames.get(Number(p))}` : all));
  return { seed: params.seed, params, runId, elapsedMs: wallNow() - started, result, faults, replay: replayCommand(params), events, plan, error };
}

/** The ZooKeeper server running and not stopped (a fault may have left it killed or paused). */
async function healZooKeeper(zookeeper: SimZooKeeper): Promise<void> {
  if (zookeeper.paused) {
    zookeeper.server.resume();
    zookeeper.paused = false;
  }
  if (!zookeeper.server.running) await zookeeper.server.restart();
}

/** Every Redlock master running and not stopped (a fault may have left some paused or killed). */
async function healRedlock(redlock: SimRedlock): Promise<void> {
  for (const i of redlock.paused) redlock.masters[i].resume();
  redlock.paused.clear();
  await Promise.all([...redlock.down].map((i) => redlock.masters[i].restart()));
  redlock.down.clear();
}

/**
 * How long after the last worker is gone a fresh instance must get each lock: the longest ttl
 * (a killed Redis holder's key lives that long), the session ttl (a killed etcd holder's key
 * lives until its session lease expires), Redis's queue allowance (a dead waiter's entry and a
 * hand-off reservation: 2 × 1.5 s) and 1.5 s of slack for the probe's own start. PostgreSQL (one
 * lock per key, `postgres:k`): a killed holder's row lives its ttl; a dead waiter's queue entry
 * 1.5 s, and a hand-off to it grants it its own ttl — at most the longest ttl + 3 s, as Redis.
 * MySQL (`mysql:k`) the same: a row with an expiry, queue entries of 3 heartbeats (1.5 s).
 * ZooKeeper (`zookeeper:k`): a killed holder's or waiter's znode lives until its session expires —
 * the session timeout (etcd's session ttl here) after the server last heard from it — as etcd.
 * Redlock (`redlock:k`): no queue on the masters, so a dead waiter leaves nothing; a killed
 * holder's key — or an unanswered try's, landed late, its clean-up dead with its worker — lives
 * at most the longest ttl on each master after the last SET or PEXPIRE, all sent before the last
 * worker was gone (every master is up and running again at the heal, before that); a waiter
 * retries every 50–100 ms: the longest ttl + 1.5 s of slack for the probe's start and its retries.
 */
export function livenessBounds(plan: Plan): Record<string, number> {
  const bounds: Record<string, number> = {};
  // The semaphore and the leader name (key 0 of their namespaces) as any lock of their backend.
  // (The edge fiber's leases closed under have a longer ttl — never on Redlock.)
  const ttl = Math.max(plan.maxTtl, plan.longTtl ?? 0);
  for (const ns of ['', 'sem/', 'leader/']) {
    for (let key = 0; key < (ns ? 1 : keyCount(plan)); key++) {
      bounds[`${ns}efficiency:${key}`] = ttl + 3_000 + 1_500;
      bounds[`${ns}correctness:${key}`] = ttl + plan.sessionTtlSeconds * 1_000 + 1_500;
      bounds[`${ns}postgres:${key}`] = ttl + 3_000 + 1_500;
      bounds[`${ns}mysql:${key}`] = ttl + 3_000 + 1_500;
      bounds[`${ns}zookeeper:${key}`] = ttl + plan.sessionTtlSeconds * 1_000 + 1_500;
      bounds[`${ns}redlock:${key}`] = plan.maxTtl + 1_500;
    }
  }
  return bounds;
}

/** Figures of one seed, one line. */
export function summaryLine(r: SeedResult): string {
  const s = r.result.stats;
  const applied = r.faults.filter((f) => !f.skipped).length;
  const v = r.result.violations;
  const writes = Object.entries(s.writes).map(([k, n]) => `${k} ${n}`).join(', ');
  const pgWrites = Object.entries(s.postgres.writes).map(([k, n]) => `${k} ${n}`).join(', ');
  const myWrites = Object.entries(s.mysql.writes).map(([k, n]) => `${k} ${n}`).join(', ');
  const x = s.mysql.xact;
  const xEnds = Object.entries(x.ends).map(([k, n]) => `${k} ${n}`).join(', ');
  const zkWrites = Object.entries(s.zookeeper.writes).map(([k, n]) => `${k} ${n}`).join(', ');
  return (
    `seed ${r.seed}: ${s.ops} ops, ${s.grants} grants (${s.reentrantGrants} reentrant; postgres ${s.postgres.grants}, mysql ${s.mysql.grants} [${s.mysql.grants - x.grants} leases, ${x.grants} transactions of ${x.calls} (${x.busy} busy, ${x.failed} failed; ended: ${xEnds}; ${x.cut} by a session end first)], zookeeper ${s.zookeeper.grants}, redlock ${s.redlock.grants}), ${s.busy} busy, ` +
    `${Object.values(s.lost).reduce((a, b) => a + b, 0)} lost, writes [${writes}] (postgres [${pgWrites}], mysql [${myWrites}], zookeeper [${zkWrites}]), decorated ${s.decorated.calls} calls/${s.decorated.grants} grants, ` +
    `semaphore ${s.sem.grants} grants (max ${s.sem.maxHolders} at once), multi-key ${s.multi.grants}, leader terms ${s.leader.grants}, ` +
    `forceRelease ${s.force.calls} (${s.force.released} ended a hold, ${s.force.failed} failed; ${s.force.forced} leases ended, ${s.force.told} told, max ${s.force.maxTellMs.toFixed(0)} ms), ` +
    `list ${s.list.calls} (${s.list.listed} listed, ${s.list.unlisted} not, ${s.list.failed} failed), ` +
    `watches ${s.watch.watches} (${s.watch.fired} fired, ${s.watch.released} forced, ${s.force.requeued} re-queued), step-downs ${s.stepdown.terms} (work ended by the signal ${s.stepdown.bySignal}, by time ${s.stepdown.byTime}), ` +
    `closes looked at ${s.closed.closes} (${s.closed.keys} keys, ${s.closed.held} held after, ${s.closed.excused} excused), ` +
    `${applied}/${r.faults.length} faults, ${v.length} violations${r.error ? ', RUN ERROR' : ''} (${(r.elapsedMs / 1000).toFixed(1)} s)`
  );
}

/** Violations of one seed, grouped, with the replay command. */
export function violationReport(r: SeedResult, max = 8): string {
  const lines = [`seed ${r.seed}: ${r.result.violations.length} violation(s) — replay: ${r.replay}`];
  const byKind = new Map<string, number>();
  for (const v of r.result.violations) byKind.set(`inv${v.invariant}:${v.kind}`, (byKind.get(`inv${v.invariant}:${v.kind}`) ?? 0) + 1);
  lines.push(`  by kind: ${[...byKind].map(([k, n]) => `${k} ×${n}`).join(', ')}`);
  // The first of every kind, then the rest in order, up to `max`.
  const firsts = new Map<string, (typeof r.result.violations)[number]>();
  for (const v of r.result.violations) if (!firsts.has(`${v.invariant}:${v.kind}`)) firsts.set(`${v.invariant}:${v.kind}`, v);
  const shown = [...new Set([...firsts.values(), ...r.result.violations])].slice(0, Math.max(max, firsts.size));
  for (const v of shown) lines.push(`  [${v.invariant}] ${v.kind}${v.lock ? ` ${v.lock}` : ''}: ${v.detail}`);
  if (r.result.violations.length > shown.length) lines.push(`  … ${r.result.violations.length - shown.length} more`);
  lines.push(`  faults: ${r.faults.map((f) => `${f.description}${f.skipped ? ` (skipped: ${f.skipped})` : ''}`).join('; ') || 'none'}`);
  if (r.error) lines.push(`  run error: ${r.error}`);
  return lines.join('\n');
}
