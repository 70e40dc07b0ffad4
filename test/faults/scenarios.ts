import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { wallNow } from '../simulation/clock.js';
import { MariaDbServer } from '../harness/mariadb.mjs';
import { PostgresServer } from '../harness/postgres.mjs';
import { ensureBinary, EtcdCluster, RedisServer } from '../harness/servers.mjs';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { check, checkLeader, checkSemaphore, tokensAcrossServerFaults, type CheckResult, type FaultEvent, type HistoryEvent, type LeaderResult, type Register, type SemaphoreResult } from './checker.js';
import type { FaultWorkerConfig } from './fault-worker.js';
import { createMySqlDatabase, createMySqlRegister, mysqlUrl, readMySqlRegister } from './mysql-register.js';
import { createPgRegister, readPgRegister } from './pg-register.js';

const WORKER = path.resolve('.tmp/compiled/test/faults/fault-worker.js');
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * libfaketime preloaded into the worker's own node process (not the `faketime` wrapper, which
 * forks: SIGSTOP would then freeze the wrapper, not the worker).
 */
function faketimeLibrary(): string {
  ensureBinary('faketime');
  for (const base of ['/usr/lib', '/usr/local/lib', '/opt/homebrew/lib']) {
    if (!existsSync(base)) continue;
    for (const dir of [base, ...readdirSync(base).map((d) => path.join(base, d))]) {
      for (const name of ['faketime/libfaketimeMT.so.1', 'faketime/libfaketimeMT.1.dylib']) {
        const candidate = path.join(dir, name);
        if (existsSync(candidate)) return candidate;
      }
    }
  }
  throw new Error('libfaketimeMT not found after installing faketime (Debian: apt-get install faketime)');
}

export interface FaultServers {
  etcd: EtcdCluster;
  lockRedis: RedisServer;
  registerRedis: RedisServer;
  /** The PostgreSQL scenarios' database: their lock backend and their register table both. */
  postgres: PostgresServer;
  /** The MySQL scenarios' MariaDB (database `ndl`): their lock backend and their register table both. */
  mysql: MariaDbServer;
  /** The ZooKeeper scenarios' lock server (their register is the register Redis, fenced). */
  zookeeper: ZooKeeperServer;
  /** The Redlock scenarios' five independent masters, without persistence (their register is the register Redis, unfenced). */
  redlockMasters: RedisServer[];
  stop(): Promise<void>;
}

/** A 3-member etcd cluster (fast elections), a lock Redis without persistence, a register Redis, a PostgreSQL, a MariaDB, a ZooKeeper, five Redlock masters. */
export async function startFaultServers(): Promise<FaultServers> {
  const [etcd, lockRedis, registerRedis, postgres, mysql, zookeeper, redlockMasters] = await Promise.all([
    EtcdCluster.start({ size: 3 }),
    RedisServer.start(),
    RedisServer.start(),
    PostgresServer.start(),
    MariaDbServer.start(),
    ZooKeeperServer.start(),
    Promise.all(Array.from({ length: 5 }, () => RedisServer.start())),
  ]);
  await createMySqlDatabase(mysql);
  return {
    etcd,
    lockRedis,
    registerRedis,
    postgres,
    mysql,
    zookeeper,
    redlockMasters,
    stop: async () => {
      await Promise.all([etcd.stop(), lockRedis.stop(), registerRedis.stop(), postgres.stop(), mysql.stop(), zookeeper.stop(), ...redlockMasters.map((m) => m.stop())]);
    },
  };
}

export interface WorkerHandle {
  index: number;
  child: ChildProcess;
  paused: boolean;
}

export interface FaultContext {
  servers: FaultServers;
  workers: WorkerHandle[];
  /** Proxies in front of the proxied worker's etcd members and register Redis, or its PostgreSQL or MariaDB. */
  proxies: TcpProxy[];
  spec: ScenarioSpec;
  deadline: number;
  now(): number;
  record(fault: FaultEvent): FaultEvent;
  /** Resolves with a worker that has just read the register (it holds the lock and is about to write). */
  nextReader(worker?: number): Promise<number>;
  /** SIGSTOP a worker for `ms`, as a GC pause would. */
  pause(worker: number, ms: number, kind?: string): Promise<void>;
  /** kill -9 a worker (it holds nothing from then on), then start a new process in its place. */
  kill9(worker: number, kind?: string): Promise<void>;
  /** SIGTERM a worker (a leader steps down through `app.close()`), wait for its exit, start a new process in its place. */
  terminate(worker: number, kind?: string): Promise<void>;
  /** The worker currently leading (leader scenarios): the last one granted and not since lost, released or killed. */
  leader(): number | undefined;
}

/** A network fault on every proxy of `ctx` for `ms` (recorded as `kind`), then healed. */
export async function proxyFault(ctx: FaultContext, kind: string, apply: (proxy: TcpProxy) => void, ms: number): Promise<void> {
  const fault = ctx.record({ t: ctx.now(), kind, worker: 0 });
  for (const proxy of ctx.proxies) apply(proxy);
  await sleep(ms);
  for (const proxy of ctx.proxies) proxy.heal();
  fault.end = ctx.now();
}

export type Step = [lastsMs: number, inflict: () => Promise<void>];

/**
 * Every step once whatever the time (the spec asserts that each fault happened, and booting the
 * workers can take seconds on a loaded machine), then again while the deadline allows; and at
 * least `quietMs` without faults at the end, so that recovery shows in the history.
 */
export async function cycles(ctx: FaultContext, quietMs: number, steps: Step[]): Promise<void> {
  for (let round = 0; ; round++) {
    for (const [lastsMs, inflict] of steps) {
      if (round > 0 && ctx.now() > ctx.deadline - quietMs - lastsMs) {
        const short = quietMs - Math.max(0, ctx.deadline - ctx.now());
        if (short > 0) await sleep(short);
        return;
      }
      await inflict();
    }
  }
}

export interface ScenarioSpec {
  name: string;
  description: string;
  backend: 'etcd' | 'redis' | 'postgres' | 'mysql' | 'zookeeper' | 'redlock';
  fenced: boolean;
  /**
   * Two workers must never be told their leases are valid at once, unless the earlier one was
   * signalled the loss of its lease (checked as `unexplainedOverlaps`).
   */
  exclusiveValidity?: boolean;
  /**
   * Run by `npm run test:faults` (and its `--long` mode) but not inside `npm test`, whose time is
   * budgeted: the same faults are covered there by the backend's integration spec.
   */
  outsideNpmTest?: boolean;
  /** A negative control: the faults must visibly bite (overlaps and lost updates). */
  negativeControl?: boolean;
  /** What the workers do (see fault-worker.ts): locks (default), semaphore permits, or leader campaigns. */
  mode?: 'lock' | 'semaphore' | 'leader';
  /** Semaphore scenarios: the permits of the key. */
  permits?: number;
  workers: number;
  durationMs: number;
  ttl: number;
  workMs: number;
  /** Worker 0 runs under faketime with this spec (e.g. '+0 x0.5': its clock runs at half speed). */
  skew?: string;
  /** Worker 0 reaches etcd or ZooKeeper and the register (or its PostgreSQL or MariaDB) through TCP proxies. */
  proxied?: boolean;
  faults(ctx: FaultContext): Promise<void>;
}

export interface ScenarioResult {
  spec: Pick<ScenarioSpec, 'name' | 'description' | 'backend' | 'fenced' | 'exclusiveValidity' | 'negativeControl' | 'workers' | 'ttl' | 'workMs' | 'durationMs' | 'mode' | 'permits'>;
  result: CheckResult;
  /** Semaphore scenarios: over-admission, acts after expiry, token order of the grants. */
  semaphore?: SemaphoreResult;
  /** Leader scenarios: term overlaps, hand-over times per fault, token order of the terms. */
  leader?: LeaderResult;
  faults: FaultEvent[];
  history: HistoryEvent[];
  register: Register;
  elapsedMs: number;
}

/** Run one scenario against the servers: workers, faults, then the checker over the history. */
export async function runScenario(spec: ScenarioSpec, servers: FaultServers): Promise<ScenarioResult> {
  const t0 = wallNow();
  const now = (): number => wallNow() - t0;
  const history: HistoryEvent[] = [];
  const faults: FaultEvent[] = [];
  const registerName = `${spec.name}-${Date.now().toString(36)}`;
  const key = `faults-${registerName}`;
  const listeners = new Set<(ev: HistoryEvent) => void>();

  const proxies: TcpProxy[] = [];
  if (spec.proxied) {
    const lockHosts = spec.backend === 'zookeeper' ? [servers.zookeeper.connectionString] : servers.etcd.hosts;
    const sqlPort = spec.backend === 'postgres' ? servers.postgres.port : spec.backend === 'mysql' ? servers.mysql.port : undefined;
    const targets = sqlPort !== undefined ? [`127.0.0.1:${sqlPort}`] : [...lockHosts, `127.0.0.1:${servers.registerRedis.port}`];
    for (const host of targets) proxies.push(await TcpProxy.start(Number(host.split(':')[1])));
  }
  if (spec.backend === 'postgres') await createPgRegister(servers.postgres, registerName);
  if (spec.backend === 'mysql') await createMySqlRegister(servers.mysql, registerName);
  const workers: WorkerHandle[] = [];
  const spawnWorker = async (index: number): Promise<WorkerHandle> => {
    const viaProxy = spec.proxied && index === 0;
    const pgHost = viaProxy ? proxies[0].endpoint : `127.0.0.1:${servers.postgres.port}`;
    const config: FaultWorkerConfig = {
      id: index,
      backend: spec.backend,
      fenced: spec.fenced,
      etcdHosts: viaProxy ? proxies.slice(0, -1).map((p) => p.endpoint) : servers.etcd.hosts,
      sessionTtlSeconds: 1,
      lockRedisUrl: servers.lockRedis.url,
      redlockUrls: servers.redlockMasters.map((m) => m.url),
      registerRedisUrl: viaProxy ? `redis://${proxies[proxies.length - 1].endpoint}` : servers.registerRedis.url,
      postgresUrl: `postgres://${servers.postgres.user}@${pgHost}/${servers.postgres.database}`,
      mysqlUrl: mysqlUrl(servers.mysql, viaProxy && spec.backend === 'mysql' ? proxies[0].endpoint : undefined),
      zookeeper: viaProxy && spec.backend === 'zookeeper' ? proxies[0].endpoint : servers.zookeeper.connectionString,
      zkSessionMs: spec.ttl,
      key,
      register: registerName,
      ttl: spec.ttl,
      workMs: spec.workMs,
      mode: spec.mode,
      permits: spec.permits,
    };
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '', FAULT_WORKER: JSON.stringify(config) };
    if (spec.skew && index === 0) Object.assign(env, { LD_PRELOAD: faketimeLibrary(), FAKETIME: spec.skew, DYLD_INSERT_LIBRARIES: faketimeLibrary(), FAULT_CLOCK_SKEWED: '1' });
    const child = spawn(process.execPath, [WORKER], { env, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const handle: WorkerHandle = { index, child, paused: false };
    workers[index] = handle;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fault worker ${index} did not start`)), 20_000);
      child.on('message', (message: Omit<HistoryEvent, 't' | 'worker'> | { e: 'ready' }) => {
        if (message.e === 'ready') {
          clearTimeout(timer);
          resolve();
          return;
        }
        // The worker's own stamp when it has one (see fault-worker.ts), the receipt time otherwise.
        const { at, validUntil, ...body } = message as Omit<HistoryEvent, 't' | 'worker'> & { at?: number };
        const ev: HistoryEvent = { ...body, t: at === undefined ? now() : at - t0, worker: index };
        if (validUntil !== undefined) ev.validUntil = validUntil - t0;
        history.push(ev);
        for (const listener of listeners) listener(ev);
      });
      child.once('exit', (code) => reject(new Error(`fault worker ${index} exited (${code}) before starting`)));
    });
    return handle;
  };
  // Started together: a Nest application context takes a while to boot on a loaded machine.
  await Promise.all(Array.from({ length: spec.workers }, (_, index) => spawnWorker(index)));

  const ctx: FaultContext = {
    servers,
    workers,
    proxies,
    spec,
    deadline: spec.durationMs,
    now,
    record: (fault) => {
      faults.push(fault);
      return fault;
    },
    nextReader: (worker) =>
      new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error('no worker read the register within 15 s'));
        }, 15_000);
        const listener = (ev: HistoryEvent): void => {
          if (ev.e === 'read' && (worker === undefined || ev.worker === worker) && !workers[ev.worker].paused) {
            listeners.delete(listener);
            clearTimeout(timer);
            resolve(ev.worker);
          }
        };
        listeners.add(listener);
      }),
    pause: async (worker, ms, kind = 'pause') => {
      const handle = workers[worker];
      handle.child.kill('SIGSTOP');
      handle.paused = true;
      const fault = ctx.record({ t: now(), kind, worker, detail: `SIGSTOP ${ms} ms` });
      await sleep(ms);
      handle.child.kill('SIGCONT');
      handle.paused = false;
      fault.end = now();
    },
    kill9: async (worker, kind = 'kill -9 holder') => {
      const { child } = workers[worker];
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      const t = now();
      const fault = ctx.record({ t, kind, worker, detail: `pid ${child.pid}` });
      // Nothing the process had not yet said gets said now; what it had sent may still arrive.
      history.push({ t, worker, e: 'killed' });
      await exited;
      await spawnWorker(worker);
      fault.end = now();
    },
    terminate: async (worker, kind = 'SIGTERM') => {
      const { child } = workers[worker];
      const exited = new Promise((resolve) => child.once('exit', resolve));
      const fault = ctx.record({ t: now(), kind, worker, detail: `pid ${child.pid}` });
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
      // Whatever it had not said before it exited, it holds nothing now.
      history.push({ t: now(), worker, e: 'killed' });
      await spawnWorker(worker);
      fault.end = now();
    },
    leader: () => {
      const holding = new Map<number, number>();
      for (const ev of history) {
        if (ev.e === 'acquired') holding.set(ev.worker, ev.t);
        if (ev.e === 'lost' || ev.e === 'releasing' || ev.e === 'released' || ev.e === 'killed') holding.delete(ev.worker);
      }
      let latest: number | undefined;
      for (const [w, t] of holding) if (!workers[w]?.paused && (latest === undefined || t > holding.get(latest)!)) latest = w;
      return latest;
    },
  };

  try {
    const injecting = spec.faults(ctx);
    const remaining = spec.durationMs - now();
    await Promise.all([injecting, sleep(Math.max(0, remaining))]);
  } finally {
    for (const w of workers) {
      w.child.kill('SIGCONT');
      w.child.send?.({ op: 'stop' });
    }
    for (const proxy of proxies) proxy.heal();
    await Promise.all(
      workers.map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.child.exitCode !== null || w.child.signalCode !== null) return resolve();
            const timer = setTimeout(() => w.child.kill('SIGKILL'), 15_000);
            w.child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
          }),
      ),
    );
    await Promise.all(proxies.map((p) => p.close()));
  }

  const register =
    spec.backend === 'postgres'
      ? await readPgRegister(servers.postgres, registerName)
      : spec.backend === 'mysql'
        ? await readMySqlRegister(servers.mysql, registerName)
        : await readRedisRegister(servers, registerName, spec.fenced);
  const { faults: specFaults, ...specRest } = spec;
  void specFaults;
  const checked = check(history, register, spec.ttl);
  // Tokens across a server fault (a restart, a kill -9 of the server or of an etcd member): a grant
  // asked for after it had ended must be above every token granted before it began.
  checked.acrossServerFaults = tokensAcrossServerFaults(history, faults.filter(isServerFault));
  checked.tokenRegressions += checked.acrossServerFaults.regressions;
  const result: ScenarioResult = { spec: specRest, result: checked, faults, history, register, elapsedMs: now() };
  if (spec.mode === 'semaphore') result.semaphore = checkSemaphore(history, spec.ttl, spec.permits ?? 1);
  if (spec.mode === 'leader') result.leader = checkLeader(history, spec.ttl, faults);
  return result;
}

/** A fault of the lock server itself (not of a worker, not of the network): what tokens must grow across. */
const isServerFault = (fault: FaultEvent): boolean => fault.worker === undefined && fault.end !== undefined && /kill -9|restart/i.test(fault.kind);

async function readRedisRegister(servers: FaultServers, registerName: string, fenced: boolean): Promise<Register> {
  const raw = new Redis(servers.registerRedis.url);
  try {
    const value = fenced ? await raw.hget(`faults:${registerName}`, 'v') : await raw.get(`faults:plain:${registerName}`);
    return JSON.parse(value ?? '[]') as Register;
  } finally {
    raw.disconnect();
  }
}
