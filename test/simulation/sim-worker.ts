// One app instance of the simulation, in its own process (so it can be SIGSTOPped and killed):
// a real Nest application with DistributedLockModule.forRoot({ redis, etcd, postgres, mysql, zookeeper, redlock }), running the
// fibers of its plan and reporting every step to the controller over IPC. Runs from the compiled
// output (.tmp/compiled/test/simulation/sim-worker.js).
//
// Like a real program paused at the wrong moment, it does not always look at lease.signal before
// writing: only the fence stands between a stale holder and the register.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { createHook } from 'node:async_hooks';
import { Injectable, Module, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { Redis as Valkey } from 'iovalkey';
import { createClient } from 'redis';
import pg from 'pg';
import { defer, Observable, repeat } from 'rxjs';
import {
  DistributedLock,
  DistributedLockError,
  DistributedLockModule,
  DistributedLockService,
  EtcdFence,
  PgFence,
  RedisFence,
  StaleFencingTokenError,
  type Lease,
  type MySqlTransactionClient,
} from '../../lib/index.js';
import { LockEngine } from '../../lib/engine/lock-engine.js';
import { backendsOf } from '../harness/backends-of.js';
import { wallNow } from './clock.js';
import type { DecoSpec, FiberOp, ForceTarget, KeyNs, LockBackendName, LockOp, Step, Store } from './plan.js';
import {
  ETCD_FENCE_PREFIX,
  lockKeyName,
  PG_REGISTER_TABLE,
  isKeyCache,
  PLAIN_PREFIX,
  REDIS_FENCE_PREFIX,
  registerName,
  type RegisterList,
  type SimEventBody,
  type WorkerCommand,
  type WorkerConfig,
  type WriteResult,
} from './protocol.js';
import { LEASE_INTERNALS } from '../../lib/engine/lease.js';
import { mysqlRegister, type MySqlTx } from './sim-mysql.js';

// SIM_DEBUG: remember where every socket was opened, to name a leaked one's creator.
const socketOrigins = new WeakMap<object, string>();
if (process.env.SIM_DEBUG) {
  for (const name of ['createConnection', 'connect'] as const) {
    const original = net[name];
    (net as Record<string, unknown>)[name] = function (this: unknown, ...args: unknown[]) {
      const socket = (original as (...a: unknown[]) => net.Socket).apply(this, args);
      socketOrigins.set(socket, (new Error().stack ?? '').split('\n').slice(2, 14).join(' | '));
      return socket;
    };
  }
}
// SIM_DEBUG: where every live timer was created, to name a timer that outlives app.close().
const timerOrigins = new Map<number, { resource: { hasRef?: () => boolean }; stack: string }>();
if (process.env.SIM_DEBUG) {
  createHook({
    init(asyncId, type, _trigger, resource) {
      if (type === 'Timeout') timerOrigins.set(asyncId, { resource: resource as { hasRef?: () => boolean }, stack: (new Error().stack ?? '').split('\n').slice(3, 12).join(' | ') });
    },
    destroy(asyncId) {
      timerOrigins.delete(asyncId);
    },
  }).enable();
}
const redisInstances = new Map<object, string>();
if (process.env.SIM_DEBUG) {
  const proto = Redis.prototype as unknown as { connect: (...a: unknown[]) => unknown };
  const connect = proto.connect;
  proto.connect = function (this: object, ...args: unknown[]) {
    if (!redisInstances.has(this)) redisInstances.set(this, (new Error().stack ?? '').split('\n').slice(2, 16).join(' | '));
    return connect.apply(this, args);
  };
}
const config = JSON.parse(readFileSync(process.env.SIM_WORKER_FILE!, 'utf8')) as WorkerConfig;
const pristine = process.getActiveResourcesInfo();

const now = wallNow;
const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });

function emit(body: SimEventBody): void {
  if (!process.connected) return;
  process.send?.({ ...body, t: now(), w: config.worker, inc: config.incarnation }, undefined, undefined, () => undefined);
}

function timeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sim: no answer within ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

const errorInfo = (error: unknown): { name: string; message: string } => ({
  name: (error as Error)?.name ?? 'Error',
  message: String((error as Error)?.message ?? error).slice(0, 300),
});

// ---------------------------------------------------------------- the app (restartable)

let app: INestApplicationContext | undefined;
let locks!: DistributedLockService;
let appUp: Promise<void> = Promise.resolve();
const debugApps: Array<{ backends: Map<string, unknown>; startedAt: number; closedAt?: number }> = [];

/** The application's own client of the running app (config.redisClient 'node-redis' or 'iovalkey'): closed after the app. */
let appRedisClient: { destroy(): void } | undefined;

/** The Redis backend's options: the module's own ioredis client from the URL, or the application's iovalkey client, or its node-redis client, connected first (bounded). */
async function redisOptions(): Promise<NonNullable<Parameters<typeof DistributedLockModule.forRoot>[0]['redis']>> {
  const timeouts = { connectTimeoutMs: 600, commandTimeoutMs: 800 };
  // SIM_DEBUG: every ioredis error carries the stack of the call that issued its command.
  if (config.redisClient === 'iovalkey') {
    const client = new Valkey(config.redisUrl).on('error', () => undefined);
    appRedisClient = { destroy: () => client.disconnect() };
    return { client, ...timeouts };
  }
  if (config.redisClient !== 'node-redis') return { url: config.redisUrl, ...timeouts, ...(process.env.SIM_DEBUG ? { options: { showFriendlyErrorStack: true } } : {}) };
  const client = createClient({ url: config.redisUrl, socket: { connectTimeout: 600, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 500) } }).on('error', () => undefined);
  try {
    await timeout(client.connect(), 3_000);
  } catch (error) {
    client.destroy();
    throw error;
  }
  appRedisClient = client;
  return { client, ...timeouts };
}

/** After app.close(): the application closes its own client (the module never does). */
function closeAppRedisClient(): void {
  appRedisClient?.destroy();
  appRedisClient = undefined;
}

async function startApp(direct = false): Promise<void> {
  const redis = await redisOptions();
  @Module({
    imports: [
      DistributedLockModule.forRoot({
        redis,
        etcd: { hosts: config.etcdHosts, sessionTtlSeconds: config.sessionTtlSeconds, commandTimeoutMs: 1_000 },
        // Routing stays by purpose (efficiency: Redis, correctness: etcd); a lock on PostgreSQL,
        // MySQL, ZooKeeper or Redlock says `backend: 'postgres'` / `'mysql'` / `'zookeeper'` / `'redlock'`.
        postgres: { connectionString: config.postgresUrl, connectTimeoutMs: 600, commandTimeoutMs: 800 },
        // MySQL (MariaDB): `backend: 'mysql'`, as PostgreSQL.
        mysql: { uri: config.mysqlUrl, connectTimeoutMs: 600, commandTimeoutMs: 800 },
        // The session timeout is etcd's session ttl: a killed or paused holder's znodes go with it.
        zookeeper: { connectionString: config.zookeeperConnectionString, sessionTimeoutMs: config.sessionTtlSeconds * 1_000, connectTimeoutMs: 1_000, commandTimeoutMs: 800 },
        // Five masters, each through its own proxy; the defaults (a master that does not answer in
        // nodeTimeoutMs, 200 ms, counts as a "no"), as a user would run it. Efficiency only.
        redlock: { urls: config.redlockUrls },
        metrics: false,
      }),
    ],
    providers: decoratedClasses,
  })
  class SimModule {}
  void direct;
  try {
    app = await NestFactory.createApplicationContext(SimModule, { logger: false });
  } catch (error) {
    closeAppRedisClient();
    throw error;
  }
  locks = app.get(DistributedLockService);
  decoratedInstances = decoratedClasses.map((cls) => app!.get(cls) as DecoratedMethodHost);
  appUsed = new Map();
  traceBackends(backendsOf(app), appUsed);
  if (process.env.SIM_DEBUG) debugApps.push({ backends: backendsOf(app), startedAt: now() });
}

let restarting: Promise<void> = Promise.resolve();

/**
 * Every key this app's backends were asked to take (`backend\0key`), with the owner ids asked for
 * (the engine's, and a multi-key lease's per-key `<owner>.<gen>-<index>`; the latest 500 per key):
 * after its close() the runner looks whether one of them still holds the key (invariant 5).
 */
let appUsed = new Map<string, Set<string>>();
const USED_OWNERS_PER_KEY = 500;

function noteUsed(used: Map<string, Set<string>>, backend: string, key: string, owner: string): void {
  const k = `${backend}\0${key}`;
  let owners = used.get(k);
  if (!owners) used.set(k, (owners = new Set()));
  owners.add(owner);
  if (owners.size > USED_OWNERS_PER_KEY) owners.delete(owners.values().next().value!);
}

const usedList = (used: Map<string, Set<string>>): Array<{ backend: string; key: string; owners: string[] }> =>
  [...used].map(([k, owners]) => {
    const [backend, key] = k.split('\0');
    return { backend, key, owners: [...owners] };
  });

/** Told of every grant a backend answers (backend name, key, owner id): the edge fiber's close-under-a-wait waits for one. */
const acquireListeners = new Set<(backend: string, key: string, owner: string) => void>();

/** One restart at a time: a second request (a slow close) waits for the first to finish. */
function restartApp(downMs: number): Promise<void> {
  restarting = restarting.then(() => restartOnce(downMs));
  return restarting;
}

async function restartOnce(downMs: number): Promise<void> {
  let up!: () => void;
  appUp = new Promise<void>((resolve) => (up = resolve));
  emit({ ev: 'app', state: 'closing' });
  const old = { backends: backendsOf(app!) as Map<string, { client?: { status?: string }; subscriber?: { status?: string } }>, used: appUsed };
  try {
    await app?.close();
    if (process.env.SIM_DEBUG) {
      const r = old.backends.get('redis');
      const report = () => `client ${r?.client?.status}, subscriber ${r?.subscriber?.status ?? 'none'}`;
      emit({ ev: 'note', message: `old redis backend after close: ${report()}` });
      setTimeout(() => emit({ ev: 'note', message: `old redis backend 1 s after close: ${report()}` }), 1000);
    }
  } catch (error) {
    emit({ ev: 'note', message: `app.close() threw: ${errorInfo(error).message}` });
  }
  closeAppRedisClient();
  emit({ ev: 'app', state: 'closed', used: usedList(old.used) });
  await sleep(downMs);
  if (process.env.SIM_DEBUG) emit({ ev: 'note', message: `after app.close() + ${downMs} ms: ${sockets().join(', ')} ${process.getActiveResourcesInfo().join(',')}` });
  for (let attempt = 0; ; attempt++) {
    try {
      await startApp();
      break;
    } catch (error) {
      emit({ ev: 'note', message: `app start failed: ${errorInfo(error).message}` });
      if (attempt > 20) throw error;
      await sleep(200);
    }
  }
  emit({ ev: 'app', state: 'up' });
  up();
}

/** Every backend call per owner (bounded), to explain an owner left in a backend's maps (invariant 5). */
const ownerTrace = new Map<string, string[]>();
function traceBackends(backends: Map<string, unknown>, used: Map<string, Set<string>>): void {
  const t0 = now();
  for (const [name, backend] of backends as Map<string, Record<string, unknown>>) {
    if (typeof backend.acquireAll === 'function') {
      // The one-step path of a multi-key lease: every key, each for its own owner id.
      const original = (backend.acquireAll as (...a: unknown[]) => Promise<{ acquired: boolean }>).bind(backend);
      backend.acquireAll = (...args: unknown[]) => {
        const [keys, owners] = args as [string[], string[]];
        keys.forEach((key, i) => noteUsed(used, name, key, owners[i]));
        const p = original(...args);
        p.then((r) => {
          if (r.acquired) for (const listener of acquireListeners) keys.forEach((key, i) => listener(name, key, owners[i]));
        }, () => undefined);
        return p;
      };
    }
    for (const method of ['acquire', 'waitForTurn', 'release', 'extend']) {
      const original = (backend[method] as (...a: unknown[]) => Promise<unknown>).bind(backend);
      backend[method] = (...args: unknown[]) => {
        const owner = method === 'acquire' ? (args[0] as { owner: string }).owner : (args[1] as string);
        if (method === 'acquire') noteUsed(used, name, (args[0] as { key: string }).key, owner);
        const trace = ownerTrace.get(owner) ?? [];
        ownerTrace.delete(owner);
        ownerTrace.set(owner, trace); // most recent last; keep the last 2,000 owners
        if (ownerTrace.size > 2_000) ownerTrace.delete(ownerTrace.keys().next().value!);
        const stamp = (): string => `+${(now() - t0).toFixed(0)}`;
        trace.push(`${stamp()} ${name}.${method}(${method === 'acquire' ? JSON.stringify({ ...(args[0] as object), owner: undefined }) : String(args[0])}${method === 'waitForTurn' ? `, ${String(args[2])}` : ''})`);
        const p = original(...args);
        if (method === 'acquire' && acquireListeners.size > 0) {
          const key = (args[0] as { key: string }).key;
          p.then((r) => {
            if ((r as { acquired?: boolean }).acquired) for (const listener of acquireListeners) listener(name, key, owner);
          }, () => undefined);
        }
        p.then(
          (r) => trace.push(`${stamp()}   ${method} -> ${JSON.stringify(r, (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`),
          (e: unknown) => trace.push(`${stamp()}   ${method} !! ${errorInfo(e).message}`),
        );
        return p;
      };
    }
  }
}

function explainLeftovers(baseline: Record<string, number>): void {
  for (const [name, entries] of records()) {
    if (isKeyCache(name) || entries.length <= (baseline[name] ?? 0)) continue;
    for (const owner of entries) {
      emit({ ev: 'note', message: `${name} still has ${owner}: ${(ownerTrace.get(owner) ?? ['no calls traced']).join(' | ')}` });
    }
  }
}

// ---------------------------------------------------------------- the registers (the resources)

const registerRedis = new Redis(config.registerRedisUrl, { commandTimeout: 1_000, maxRetriesPerRequest: 1, connectTimeout: 1_000, showFriendlyErrorStack: !!process.env.SIM_DEBUG });
if (process.env.SIM_DEBUG) {
  // A rejection nobody handled crashes the worker (Node's default): say first where it came from.
  process.on('unhandledRejection', (reason) => {
    process.stderr.write(`[sim-worker w${config.worker}] unhandled rejection: ${(reason as Error)?.stack ?? String(reason)}\n`);
    process.exit(1);
  });
}
registerRedis.on('error', () => undefined);
const registerEtcd = new Etcd3({ hosts: config.registerEtcdHosts });
/**
 * The PgFence register's pool: its own connections to the backend's PostgreSQL (through the
 * register proxy). A statement waits at most 1.2 s on the server — a row lock held by a paused
 * holder's open transaction included — and a connection at most 1 s.
 */
const registerPg = new pg.Pool({ connectionString: config.registerPostgresUrl, max: 4, connectionTimeoutMillis: 1_000, statement_timeout: 1_200, idleTimeoutMillis: 2_000 });
// A server restart errors idle clients (and a checked-out one may emit twice): never a crash.
registerPg.on('error', () => undefined);
registerPg.on('connect', (client) => client.on('error', () => undefined));

/** A checked-out register connection in a transaction (`rmw` with `tx`): the read, the write and COMMIT go through it. */
interface PgTx {
  client: pg.PoolClient;
}
/** The MySqlFence register (sim-mysql.ts): its own pool to the MySQL backend's MariaDB, through the register proxy. */
const registerMy = mysqlRegister(config.registerMysqlUrl, config.mysqlUrl);
/** A register transaction: PostgreSQL's or MySQL's (by the step's store). */
type SqlTx = PgTx | MySqlTx;
const pgClient = (tx?: SqlTx): pg.PoolClient | undefined => (tx && 'client' in tx ? tx.client : undefined);
const myTx = (tx?: SqlTx): MySqlTx | undefined => (tx && 'connection' in tx ? tx : undefined);

function fenceFor(store: Store, svc: DistributedLockService): RedisFence | EtcdFence | PgFence {
  // The service is the lease source (current() and every lease of the context), as documented.
  // The etcd registers (routed and ZooKeeper leases') have their lock's name; the Redis one is
  // mapped to it with lockKey; the PostgreSQL row's id is its lock's key.
  const register = /\/register-(\d+)$/;
  const redisOptions = { keyPrefix: REDIS_FENCE_PREFIX, leases: svc, lockKey: (name: string) => name.replace(register, '/k$1') };
  if (store === 'postgres') return new PgFence({ table: PG_REGISTER_TABLE, leases: svc, lockKey: (id) => String(id) });
  return store === 'redis' ? new RedisFence(registerRedis, redisOptions) : new EtcdFence(registerEtcd, { prefix: ETCD_FENCE_PREFIX, leases: svc, timeoutMs: 1_500 });
}

async function readRegister(store: Store, svc: DistributedLockService, key: number, token: bigint | undefined, tx?: SqlTx, ns?: KeyNs): Promise<RegisterList> {
  const name = registerName(config.runId, key, store, ns);
  let raw: string | null | undefined;
  if (config.control === 'unfenced') raw = await registerRedis.get(PLAIN_PREFIX + registerName(config.runId, key, 'redis'));
  else if (store === 'postgres') raw = (await timeout((fenceFor(store, svc) as PgFence).read(pgClient(tx) ?? registerPg, name, token), 1_500)).v as string;
  else if (store === 'mysql') raw = await registerMy.read(svc, name, token, myTx(tx));
  else raw = await timeout((fenceFor(store, svc) as RedisFence | EtcdFence).read(name, token), 1_500);
  return JSON.parse(raw ?? '[]') as RegisterList;
}

async function writeRegister(store: Store, svc: DistributedLockService, key: number, value: RegisterList, token: bigint | undefined, tx?: SqlTx, ns?: KeyNs): Promise<void> {
  const name = registerName(config.runId, key, store, ns);
  if (config.control === 'unfenced') {
    await registerRedis.set(PLAIN_PREFIX + registerName(config.runId, key, 'redis'), JSON.stringify(value));
    return;
  }
  if (store === 'postgres') {
    const client = pgClient(tx);
    await timeout((fenceFor(store, svc) as PgFence).update(client ?? registerPg, name, { v: JSON.stringify(value) }, token), 1_500);
    // Acknowledged once committed: an unanswered COMMIT is a write of unknown outcome.
    if (client) await timeout(client.query('COMMIT'), 1_500);
    return;
  }
  if (store === 'mysql') return registerMy.write(svc, name, value, token, myTx(tx));
  await timeout((fenceFor(store, svc) as RedisFence | EtcdFence).write(name, JSON.stringify(value), token), 1_500);
}

type PgTxEnd = 'committed' | 'rollback' | 'destroy';

/**
 * BEGIN on a register connection of its own. `end`: 'committed' gives the connection back;
 * 'rollback' rolls back what is still open; 'destroy' — after an error or a timeout, when the
 * connection's state is unknown — closes it (PostgreSQL then rolls the transaction back).
 */
async function beginPgTx(): Promise<PgTx & { end(how: PgTxEnd): void }> {
  const client = await registerPg.connect();
  let ended = false;
  const end = (how: PgTxEnd): void => {
    if (ended) return;
    ended = true;
    if (how === 'committed') client.release();
    else if (how === 'destroy') client.release(true);
    else
      timeout(client.query('ROLLBACK'), 1_500).then(
        () => client.release(),
        () => client.release(true),
      );
  };
  try {
    await timeout(client.query('BEGIN'), 1_500);
  } catch (error) {
    end('destroy');
    throw error;
  }
  return { client, end };
}

// ---------------------------------------------------------------- leases

/** A "lock" that does not lock (negative control `nolock`): granted at once, a local token. */
class FakeLease {
  private readonly controller = new AbortController();
  private validUntil: number;
  private ended = false;
  readonly reentrant = false;

  constructor(
    readonly token: bigint,
    ttl: number,
  ) {
    this.validUntil = performance.now() + ttl;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  remainingMs(): number {
    return this.ended ? 0 : Math.max(0, this.validUntil - performance.now());
  }

  async extend(ttl: number): Promise<void> {
    this.validUntil = performance.now() + ttl;
  }

  async release(): Promise<void> {
    this.ended = true;
  }
}

type AnyLease = Lease | FakeLease;
let fakeTokens = 0n;
const coreRoot = new WeakMap<object, string>();

interface Held {
  id: string;
  root: string;
  op: LockOp;
  lease: AnyLease;
  svc: DistributedLockService;
  /** Split read-modify-write: what `read` saw, waiting for `write-outer`. */
  pending: Map<Store, RegisterList>;
  /** The holder stopped using it (an unsubscribed Observable's body): no more steps, no samples. */
  stopped?: boolean;
}

function validity(lease: AnyLease): number | undefined {
  if (lease.signal.aborted) return undefined;
  const remaining = lease.remainingMs();
  const t = now();
  return remaining > 0 ? t + remaining : undefined;
}

function sample(held: Held): void {
  if (held.stopped) return;
  const V = validity(held.lease);
  if (V !== undefined) emit({ ev: 'sample', id: held.root, V });
}

function granted(id: string, op: LockOp, lease: AnyLease, svc: DistributedLockService): Held {
  let root = id;
  if (lease instanceof FakeLease) {
    // nothing shared
  } else if (lease.reentrant) {
    root = coreRoot.get(LEASE_INTERNALS.core(lease)) ?? `unknown-core:${id}`;
  } else {
    coreRoot.set(LEASE_INTERNALS.core(lease), id);
  }
  // A multi-key lease: its owner id and the generation its keys were taken in (the MultiKeyBackend's,
  // read from the library's internals: each key's owner on the backend is `<owner>.<gen>-<index>`).
  const ownership: { owner?: string; gen?: number } = {};
  if (op.keys && !(lease instanceof FakeLease) && !lease.reentrant) {
    ownership.owner = LEASE_INTERNALS.core(lease).owner;
    const generations = (LEASE_INTERNALS.core(lease).backend as unknown as { generations?: Map<string, number> }).generations;
    if (generations instanceof Map) ownership.gen = generations.get(ownership.owner) ?? 0;
  }
  emit({ ev: 'grant', id, key: op.key, purpose: op.purpose, backend: op.backend, token: lease.token?.toString(), V: validity(lease), reentrant: lease.reentrant, root, ...primitiveFields(op), ...ownership });
  if (op.watch && ownership.owner !== undefined && app) checkHeld(id, op, op.watch.key, app);
  if (!lease.reentrant) {
    lease.signal.addEventListener(
      'abort',
      () => emit({ ev: 'lost', id, reason: String((lease.signal.reason as { reason?: string })?.reason ?? (lease.signal.reason as Error)?.message) }),
      { once: true },
    );
  }
  return { id, root, op, lease, svc, pending: new Map() };
}

/**
 * A watched multi-key grant: who the backend shows holding the watched key right after it (the
 * checker's evidence that a forceRelease() of that key before the grant did not leave the lease
 * without it — see the `held-check` event). In the background: the lease's own steps go on.
 */
function checkHeld(id: string, op: LockOp, key: number, from: INestApplicationContext): void {
  const backend = backendsOf(from).get(backendNameOf(op)) as { inspect?: (key: string) => Promise<{ owner?: string } | null> } | undefined;
  if (!backend?.inspect) return;
  const where = { purpose: op.purpose, ...(op.backend ? { backend: op.backend } : {}), ...(op.ns ? { ns: op.ns } : {}) };
  timeout(backend.inspect(lockKeyName(config.runId, key, op.backend, op.ns)), 1_000).then(
    (held) => emit({ ev: 'held-check', id, key, ...where, ...(held?.owner !== undefined ? { owner: held.owner } : {}) }),
    () => emit({ ev: 'held-check', id, key, ...where, failed: true }),
  );
}

// ---------------------------------------------------------------- decorated methods

/** One call of a decorated method, passed as its last argument: how its body reports. */
interface DecoCallState {
  /** Event id of the (current subscription's) lease on `key`; the key2 lease is `${id}.2`. */
  id: string;
  fiber: number;
  op: LockOp;
  chain: Held[];
  /** The body started (false after a skip). */
  ran: boolean;
  /** observable: the caller unsubscribed. */
  cancelled: boolean;
  /** Leases in the caller's context before the call: the call's own come after them. */
  base: number;
}

interface DecoratedMethodHost {
  readonly svc: DistributedLockService;
  run(k: number, k2: number, call: DecoCallState): Promise<void> | Observable<number>;
}

/**
 * The body's view of one declared lock: the lease for `key` in its async context. A decorated
 * body without it ran unlocked — the promise "a decorated method never runs without its lock".
 */
function enter(
  call: DecoCallState,
  svc: DistributedLockService,
  id: string,
  key: number,
  purpose: LockOp['purpose'],
  backend: LockBackendName | undefined,
  which: 'outer' | 'inner',
): Held | undefined {
  if (call.cancelled) emit({ ev: 'unlocked', id, detail: 'the body started after its caller unsubscribed' });
  const name = lockKeyName(config.runId, key, backend);
  // The call's own leases, outermost first. Two declarations on one key (stacked, or an override
  // and its base) are one lock: the outer declaration's lease is the first, the inner one's
  // (a reentrant handle on it) the last.
  const own = svc.currentLeases().slice(call.base).filter((l) => l.key === name && l.purpose === purpose);
  const lease = which === 'outer' ? own[0] : own.at(-1);
  if (!lease || !LEASE_INTERNALS.held(lease)) {
    emit({ ev: 'unlocked', id, detail: `no held lease on ${name} (${purpose}) in the body's context: [${svc.currentLeases().map((l) => `${l.key}:${LEASE_INTERNALS.held(l)}`).join(', ')}]` });
    return undefined;
  }
  return granted(id, { ...call.op, key, purpose, backend, steps: [] }, lease, svc);
}

/** The primary lease's body: the op's steps, then "stop using it" (the decorator releases after). */
async function primaryBody(call: DecoCallState, svc: DistributedLockService, stopped?: { stop?: () => void }): Promise<void> {
  call.ran = true;
  const held = enter(call, svc, call.id, call.op.key, call.op.purpose, call.op.backend, 'inner');
  if (!held) return;
  let relSent = false;
  const rel = (): void => {
    if (relSent) return;
    relSent = true;
    held.stopped = true;
    emit({ ev: 'rel', id: held.id });
  };
  if (stopped) stopped.stop = rel;
  try {
    await steps(call.fiber, call.op, held, call.chain);
  } finally {
    rel();
  }
}

/** The second declaration's lease (key2) around `inner`: reported on entry, "stopped using" after. */
async function holdingSecond(
  call: DecoCallState,
  svc: DistributedLockService,
  k2: number,
  purpose2: LockOp['purpose'],
  backend2: LockBackendName | undefined,
  inner: () => Promise<void>,
): Promise<void> {
  const second = enter(call, svc, `${call.id}.2`, k2, purpose2, backend2, 'outer');
  try {
    await inner();
  } finally {
    if (second) {
      second.stopped = true;
      emit({ ev: 'rel', id: second.id });
    }
  }
}

const declaration = (spec: DecoSpec, which: 'key' | 'key2') => {
  const purpose = which === 'key' ? spec.purpose : spec.purpose2;
  const backend = which === 'key' ? spec.backend : spec.backend2;
  const key = which === 'key' ? (k: number) => lockKeyName(config.runId, k, backend) : (_k: number, k2: number) => lockKeyName(config.runId, k2, backend);
  const on = backend ? { backend } : {};
  return spec.onBusy === 'wait' ? { purpose, key, ttl: spec.ttl, wait: spec.wait, ...on } : { purpose, key, ttl: spec.ttl, onBusy: spec.onBusy, ...on };
};

/** One provider class per catalog entry (declarations are static: built once per process). */
function buildDecoratedClass(spec: DecoSpec, index: number): Type {
  switch (spec.shape) {
    case 'single': {
      @Injectable()
      class Single {
        constructor(readonly svc: DistributedLockService) {}
        @DistributedLock(declaration(spec, 'key'))
        async run(_k: number, _k2: number, call: DecoCallState): Promise<void> {
          await primaryBody(call, this.svc);
        }
      }
      Object.defineProperty(Single, 'name', { value: `Single${index}` });
      return Single;
    }
    case 'stacked': {
      @Injectable()
      class Stacked {
        constructor(readonly svc: DistributedLockService) {}
        @DistributedLock(declaration(spec, 'key2'))
        @DistributedLock(declaration(spec, 'key'))
        async run(_k: number, k2: number, call: DecoCallState): Promise<void> {
          // Both declarations hold while the body runs: the outer (key2) one too.
          await holdingSecond(call, this.svc, k2, spec.purpose2, spec.backend2, () => primaryBody(call, this.svc));
        }
      }
      Object.defineProperty(Stacked, 'name', { value: `Stacked${index}` });
      return Stacked;
    }
    case 'inherited': {
      @Injectable()
      class Base {
        constructor(readonly svc: DistributedLockService) {}
        @DistributedLock(declaration(spec, 'key'))
        async run(_k: number, _k2: number, call: DecoCallState): Promise<void> {
          await primaryBody(call, this.svc);
        }
      }
      @Injectable()
      class Sub extends Base {
        @DistributedLock(declaration(spec, 'key2'))
        override async run(k: number, k2: number, call: DecoCallState): Promise<void> {
          // The override holds key2; its super call takes key (reentrant when they are one).
          await holdingSecond(call, this.svc, k2, spec.purpose2, spec.backend2, () => super.run(k, k2, call));
        }
      }
      Object.defineProperty(Sub, 'name', { value: `Inherited${index}` });
      return Sub;
    }
    case 'observable': {
      @Injectable()
      class Streams {
        constructor(readonly svc: DistributedLockService) {}
        @DistributedLock(declaration(spec, 'key'))
        run(_k: number, _k2: number, call: DecoCallState): Observable<number> {
          return new Observable<number>((subscriber) => {
            const stopped: { stop?: () => void } = {};
            primaryBody(call, this.svc, stopped).then(
              () => {
                subscriber.next(1);
                subscriber.complete();
              },
              (error: unknown) => subscriber.error(error),
            );
            // Unsubscribed: the holder stops using the lease now (the decorator releases it).
            return () => stopped.stop?.();
          });
        }
      }
      Object.defineProperty(Streams, 'name', { value: `Observable${index}` });
      return Streams;
    }
  }
}

const decoratedClasses: Type[] = config.decorated.map(buildDecoratedClass);
let decoratedInstances: DecoratedMethodHost[] = [];

/** A call of a decorated method: its events, its outcome (busy, skipped, failed). */
async function runDecorated(fiber: number, op: LockOp, chain: Held[], id: string): Promise<void> {
  const deco = op.deco!;
  const spec = config.decorated[deco.method];
  const host = decoratedInstances[deco.method];
  const call: DecoCallState = { id, fiber, op, chain, ran: false, cancelled: false, base: host.svc.currentLeases().length };
  if (spec.shape === 'stacked' || spec.shape === 'inherited') {
    // The second declaration's lease (its request is logged at the call: never later than it was made).
    emit({ ev: 'req', id: `${id}.2`, key: deco.key2, purpose: spec.purpose2, backend: spec.backend2, kind: `decorated-${spec.shape}-2`, ttl: spec.ttl, wait: op.wait, parent: chain.at(-1)?.id });
  }
  if (spec.shape !== 'observable') {
    await (host.run(op.key, deco.key2, call) as Promise<void>);
    if (!call.ran) emit({ ev: 'busy', id });
    return;
  }
  // Re-subscribed with repeat(): each subscription locks anew, under its own event id.
  let n = 0;
  const source = defer(() => {
    if (n > 0) {
      call.id = `${id}.s${n}`;
      emit({ ev: 'req', id: call.id, key: op.key, purpose: op.purpose, backend: op.backend, kind: 'decorated-observable', ttl: op.ttl, wait: op.wait, parent: chain.at(-1)?.id });
    }
    n += 1;
    return host.run(op.key, deco.key2, call) as Observable<number>;
  }).pipe(repeat(deco.repeat));
  await new Promise<void>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const subscription = source.subscribe({
      complete: () => {
        clearTimeout(timer);
        resolve();
      },
      error: (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    });
    if (deco.unsubscribeAfterMs !== undefined) {
      timer = setTimeout(() => {
        call.cancelled = true;
        subscription.unsubscribe();
        resolve();
      }, deco.unsubscribeAfterMs);
    }
  });
}

// ---------------------------------------------------------------- fibers

let draining = false;
const drain = new AbortController();
let seq = 0;
/** Calls running beside a fiber (a blocker's lease, a rival candidate, the watcher's work): the drain waits for them too. */
const background = new Set<Promise<void>>();
function inBackground(task: Promise<void>): void {
  const tracked = task.catch((error: unknown) => emit({ ev: 'note', message: `background call failed: ${errorInfo(error).message}` }));
  background.add(tracked);
  void tracked.finally(() => background.delete(tracked));
}
/** The backend name a lock's calls go to: its named backend, or its purpose's. */
const backendNameOf = (o: { purpose: LockOp['purpose']; backend?: LockBackendName }): string => o.backend ?? (o.purpose === 'efficiency' ? 'redis' : 'etcd');
let elements = 0;

/** What a req / grant says of a semaphore, multi-key or leader lease. */
function primitiveFields(op: LockOp): { ns?: KeyNs; permits?: number; keys?: number[] } {
  const out: { ns?: KeyNs; permits?: number; keys?: number[] } = {};
  if (op.ns) out.ns = op.ns;
  if (op.permits !== undefined) out.permits = op.permits;
  if (op.keys) out.keys = op.keys;
  return out;
}

/** Whether the backend this op's lock is on has semaphores (PostgreSQL's may not yet). */
function hasSemaphore(op: LockOp): boolean {
  const name = op.backend ?? (op.purpose === 'efficiency' ? 'redis' : 'etcd');
  return (backendsOf(app!).get(name) as { capabilities?: { semaphore?: boolean } } | undefined)?.capabilities?.semaphore === true;
}
const noSemaphoreNoted = new Set<string>();

/** The key (or keys) an op locks. */
const opKey = (op: LockOp): string | string[] => (op.keys ? op.keys.map((k) => lockKeyName(config.runId, k, op.backend)) : lockKeyName(config.runId, op.key, op.backend, op.ns));

/** A leader term: campaign() (until it leads or the drain begins), the steps, then step down (release). */
async function runCampaign(fiber: number, op: LockOp, chain: Held[], id: string, svc: DistributedLockService): Promise<void> {
  // The campaign's signal stops a candidate still waiting at the drain; a leader steps down by
  // release() after its steps (reported first), never by the signal.
  const stop = new AbortController();
  const onDrain = (): void => stop.abort(new Error('sim: draining'));
  if (drain.signal.aborted) onDrain();
  else drain.signal.addEventListener('abort', onDrain, { once: true });
  let lease: Lease;
  try {
    lease = await svc.campaign(lockKeyName(config.runId, op.key, op.backend, op.ns), { purpose: op.purpose, ttl: op.ttl, signal: stop.signal, ...(op.backend ? { backend: op.backend } : {}) });
  } finally {
    drain.signal.removeEventListener('abort', onDrain);
  }
  const held = granted(id, op, lease, svc);
  // The edge fiber's step-down: the campaign's signal aborted mid-term, while the steps (work on
  // term.signal) run; a rival candidate of this process campaigns meanwhile, to lead next.
  let stepDown: NodeJS.Timeout | undefined;
  if (op.stepDownAfterMs !== undefined) {
    stepDown = setTimeout(() => {
      emit({ ev: 'stepdown', id });
      stop.abort(new Error('sim: stepping down'));
    }, op.stepDownAfterMs);
  }
  if (op.rival) {
    const rival: LockOp = { kind: 'campaign', key: op.key, purpose: op.purpose, ttl: op.ttl, wait: 0, steps: op.rival.steps, ...(op.backend ? { backend: op.backend } : {}), ...(op.ns ? { ns: op.ns } : {}) };
    inBackground(runOp(fiber, rival, []));
  }
  try {
    await body(fiber, op, held, chain);
  } finally {
    clearTimeout(stepDown);
  }
}

/**
 * The watcher's part (one watch at a time): look at `key` on its backend until it shows a multi-key
 * owner (`<owner>.<gen>-<index>`) — the edge fiber's acquisition taking its keys one by one, or a
 * lease of one — then forceRelease() it and take it itself, so a lease granted without it overlaps
 * this holder (invariant 1). Bounded: 3 s, or until the request has its answer (unwatch).
 */
const watches = new Map<string, { stop: boolean }>();
async function runWatch(cmd: Extract<WorkerCommand, { cmd: 'watch' }>): Promise<void> {
  const id = `w${config.worker}.${config.incarnation}.watch.${seq++}`;
  if (watches.size > 0 || draining || !app) {
    emit({ ev: 'watch', id, target: cmd.id, phase: 'end', fired: false, why: draining ? 'draining' : 'already watching' });
    return;
  }
  const state = { stop: false };
  watches.set(cmd.id, state);
  emit({ ev: 'watch', id, target: cmd.id, phase: 'start' });
  try {
    const up = await Promise.race([appUp.then(() => true), sleep(50).then(() => false)]);
    if (!up) {
      emit({ ev: 'watch', id, target: cmd.id, phase: 'end', fired: false, why: 'app restarting' });
      return;
    }
    const svc = locks;
    const backend = backendsOf(app).get(backendNameOf(cmd)) as { inspect?: (key: string) => Promise<{ owner?: string } | null> } | undefined;
    const name = lockKeyName(config.runId, cmd.key, cmd.backend);
    if (!backend?.inspect) {
      emit({ ev: 'watch', id, target: cmd.id, phase: 'end', fired: false, why: 'no inspect()' });
      return;
    }
    const until = now() + 3_000;
    let owner: string | undefined;
    while (!state.stop && !draining && now() < until) {
      try {
        const held = await timeout(backend.inspect(name), 1_000);
        if (held?.owner?.includes('.')) {
          owner = held.owner;
          break;
        }
        await sleep(1);
      } catch {
        await sleep(20);
      }
    }
    if (!owner) {
      emit({ ev: 'watch', id, target: cmd.id, phase: 'end', fired: false, why: state.stop ? 'answered first' : draining ? 'draining' : 'timed out' });
      return;
    }
    const where = cmd.backend ? { backend: cmd.backend } : { purpose: cmd.purpose };
    const forceId = `${id}.force`;
    emit({ ev: 'force', id: forceId, key: cmd.key, purpose: cmd.purpose, backend: cmd.backend, watch: cmd.id });
    try {
      const released = await timeout(svc.forceRelease(name, where), 3_000);
      emit({ ev: 'force-done', id: forceId, released, owner });
    } catch (error) {
      emit({ ev: 'force-done', id: forceId, message: `${errorInfo(error).name}: ${errorInfo(error).message}`, owner });
    }
    // Had the attempt taken its last key by then? (Its owner there: `<owner>.<gen>-<count - 1>`.)
    let complete: boolean | undefined;
    const m = /^(.+\.\d+)-\d+$/.exec(owner);
    if (m) {
      try {
        const last = await timeout(backend.inspect(lockKeyName(config.runId, cmd.last, cmd.backend)), 1_000);
        complete = last?.owner === `${m[1]}-${cmd.count - 1}`;
      } catch {
        complete = undefined;
      }
    }
    emit({ ev: 'watch', id, target: cmd.id, phase: 'end', fired: true, owner, ...(complete !== undefined ? { complete } : {}) });
    // …and take the key: a lease granted without it is valid beside this one.
    const take: LockOp = { kind: 'try', key: cmd.key, purpose: cmd.purpose, ttl: cmd.ttl, wait: 0, steps: [{ s: 'hold', ms: cmd.holdMs }], ...(cmd.backend ? { backend: cmd.backend } : {}) };
    await runOp(config.fibers.length, take, []);
  } finally {
    watches.delete(cmd.id);
  }
}

/**
 * A blocker of an edge multi-key op: another lease of this process on the set's highest key, taken
 * before the request (resolves once granted, or given up) and held `ms` beside it.
 */
function startBlocker(fiber: number, op: LockOp): Promise<void> {
  const b = op.blocker!;
  const blocker: LockOp = { kind: 'acquire', key: b.key, purpose: op.purpose, ttl: b.ttl, wait: 1_000, steps: [{ s: 'hold', ms: b.ms }], ...(op.backend ? { backend: op.backend } : {}) };
  return new Promise<void>((resolve) => inBackground(runOp(fiber, blocker, [], resolve).finally(resolve)));
}

/**
 * An edge multi-key op's close: once the acquisition has its first (sorted) key — a grant of it to
 * a multi-key owner — and still waits `afterMs` later, app.close() of this worker's app (a new one
 * `downMs` later). Returns what disarms it (the request has its answer).
 */
function armClose(op: LockOp): () => void {
  const first = lockKeyName(config.runId, Math.min(...op.keys!), op.backend);
  const backend = backendNameOf(op);
  let answered = false;
  let timer: NodeJS.Timeout | undefined;
  const listener = (name: string, key: string, owner: string): void => {
    if (name !== backend || key !== first || !owner.includes('.')) return;
    acquireListeners.delete(listener);
    timer = setTimeout(() => {
      if (answered || draining) return;
      emit({ ev: 'note', message: `closing the app while a multi-key acquisition of ${op.keys!.length} keys on ${backend} holds ${first} and waits` });
      void restartApp(op.close!.downMs).catch((error) => emit({ ev: 'note', message: `restart failed: ${errorInfo(error).message}` }));
    }, op.close!.afterMs);
  };
  acquireListeners.add(listener);
  return () => {
    answered = true;
    acquireListeners.delete(listener);
    clearTimeout(timer);
  };
}

/** An operator's forceRelease() (an inspect() first, now and then), with its answer. */
async function runForce(fiber: number, target: ForceTarget, inspect: boolean): Promise<void> {
  const svc = locks;
  const id = `w${config.worker}.${config.incarnation}.${fiber}.${seq++}`;
  const name = lockKeyName(config.runId, target.key, target.backend, target.ns);
  const where = target.backend ? { backend: target.backend } : { purpose: target.purpose };
  let inspected: string | undefined;
  if (inspect) {
    try {
      const info = await timeout(svc.inspect(name, where), 3_000);
      inspected = info ? JSON.stringify({ ...info, token: info.token?.toString() }) : 'free';
    } catch (error) {
      inspected = `failed: ${errorInfo(error).message}`;
    }
    // …and list() as the lock board asks it: a lease valid for the whole call must be in the answer.
    const listId = `${id}.list`;
    emit({ ev: 'list', id: listId, key: target.key, purpose: target.purpose, backend: target.backend, ...(target.ns ? { ns: target.ns } : {}) });
    try {
      const held = await timeout(svc.list(where, { prefix: name }), 3_000);
      emit({ ev: 'list-done', id: listId, listed: held.some((info) => info.key === name) });
    } catch (error) {
      emit({ ev: 'list-done', id: listId, message: `${errorInfo(error).name}: ${errorInfo(error).message}` });
    }
  }
  emit({ ev: 'force', id, key: target.key, purpose: target.purpose, backend: target.backend, ...(target.ns ? { ns: target.ns } : {}) });
  try {
    const released = await timeout(svc.forceRelease(name, where), 3_000);
    emit({ ev: 'force-done', id, released, inspected });
  } catch (error) {
    emit({ ev: 'force-done', id, message: `${errorInfo(error).name}: ${errorInfo(error).message}`, inspected });
  }
}

async function runOp(fiber: number, op: LockOp, chain: Held[], onGranted?: () => void): Promise<void> {
  if (op.blocker && config.control === undefined) await startBlocker(fiber, op);
  const svc = locks;
  const id = `w${config.worker}.${config.incarnation}.${fiber}.${seq++}`;
  if (op.permits !== undefined && op.permits > 1 && !hasSemaphore(op)) {
    // A backend without semaphores (yet): the op is left out, said once.
    const name = op.backend ?? op.purpose;
    if (!noSemaphoreNoted.has(name)) emit({ ev: 'note', message: `no semaphores on ${name}: its semaphore operations are left out` });
    noSemaphoreNoted.add(name);
    return;
  }
  const key = opKey(op);
  emit({ ev: 'req', id, key: op.key, purpose: op.purpose, backend: op.backend, kind: op.kind, ttl: op.ttl, wait: op.wait, parent: chain.at(-1)?.id, ...primitiveFields(op), ...(op.watch ? { watch: op.watch } : {}) });
  const disarm = op.close ? armClose(op) : undefined;
  let aborter: AbortController | undefined;
  let abortTimer: NodeJS.Timeout | undefined;
  const signals = [drain.signal];
  if (op.kind === 'abort-wait') {
    aborter = new AbortController();
    abortTimer = setTimeout(() => aborter!.abort(new Error('sim: aborted while waiting')), op.abortAfterMs ?? 0);
    signals.push(aborter.signal);
  }
  const signal = AbortSignal.any(signals);
  const opts = { purpose: op.purpose, ttl: op.ttl, wait: op.wait, signal, ...(op.backend ? { backend: op.backend } : {}), ...(op.permits !== undefined ? { permits: op.permits } : {}) };
  try {
    if (config.control === 'nolock') {
      const lease = new FakeLease(++fakeTokens, op.ttl);
      clearTimeout(abortTimer);
      await body(fiber, op, granted(id, op, lease, svc), chain);
      return;
    }
    if (op.kind === 'decorated') {
      await runDecorated(fiber, op, chain, id);
      return;
    }
    if (op.kind === 'campaign') {
      await runCampaign(fiber, op, chain, id, svc);
      return;
    }
    if (op.kind === 'using') {
      let held: Held | undefined;
      await svc.using(key, opts, async (lease) => {
        disarm?.();
        held = granted(id, op, lease, svc);
        await steps(fiber, op, held, chain);
        emit({ ev: 'rel', id });
      });
      if (held) emit({ ev: 'rel-done', id, ok: true });
      return;
    }
    let lease: Lease | null;
    if (op.kind === 'try') {
      const { signal: _drop, wait: _wait, ...tryOpts } = opts;
      void _drop;
      void _wait;
      lease = await svc.tryAcquire(key, tryOpts);
    } else {
      lease = await svc.acquire(key, opts);
    }
    clearTimeout(abortTimer);
    disarm?.();
    if (!lease) {
      emit({ ev: 'busy', id });
      return;
    }
    const held = granted(id, op, lease, svc);
    onGranted?.();
    await body(fiber, op, held, chain);
  } catch (error) {
    const info = errorInfo(error);
    emit(info.name === 'LockBusyError' ? { ev: 'busy', id } : { ev: 'fail', id, ...info });
  } finally {
    clearTimeout(abortTimer);
    disarm?.();
  }
}

/** Steps, then release (acquire / try / nolock), reporting the release. */
async function body(fiber: number, op: LockOp, held: Held, chain: Held[]): Promise<void> {
  try {
    await steps(fiber, op, held, chain);
  } finally {
    if (!op.abandon || draining) {
      emit({ ev: 'rel', id: held.id });
      try {
        await held.lease.release();
        emit({ ev: 'rel-done', id: held.id, ok: true });
      } catch (error) {
        emit({ ev: 'rel-done', id: held.id, ok: false, message: errorInfo(error).message });
      }
    }
  }
}

async function steps(fiber: number, op: LockOp, held: Held, chain: Held[]): Promise<void> {
  for (const step of op.steps) {
    if (draining || held.stopped) return;
    sample(held);
    try {
      await runStep(fiber, step, held, chain);
    } catch (error) {
      emit({ ev: 'note', message: `${held.id} step ${step.s}: ${errorInfo(error).message}` });
    }
  }
  sample(held);
}

function tokenFor(
  mode: 'explicit' | 'implicit',
  lease: AnyLease,
  svc: DistributedLockService,
  registerKey: number,
  backend: LockBackendName | undefined,
  ns?: KeyNs,
): { pass?: bigint; used?: bigint } {
  if (mode === 'explicit') return { pass: lease.token, used: lease.token };
  // What the fence will use: the lease of this async context on the register's lock key (older
  // versions of the library took the innermost lease, whatever its key).
  const all = (svc as unknown as { currentLeases?: () => readonly Lease[] }).currentLeases;
  const lockKey = lockKeyName(config.runId, registerKey, backend, ns);
  const used = typeof all === 'function' ? all.call(svc).findLast((l) => l.key === lockKey)?.token : svc.current()?.token;
  return { pass: undefined, used };
}

function classifyWrite(error: unknown): WriteResult {
  if (error instanceof StaleFencingTokenError) return 'stale';
  // Refused before anything was sent (no token, lease known lost, bad option).
  if (error instanceof DistributedLockError) return 'refused';
  return 'unknown';
}

async function runStep(fiber: number, step: Step, held: Held, chain: Held[]): Promise<void> {
  const { lease, svc, op } = held;
  switch (step.s) {
    case 'hold':
      await sleep(step.ms, drain.signal);
      sample(held);
      return;
    case 'extend':
      emit({ ev: 'ext-req', id: held.root, ttl: step.ttl });
      try {
        const extending = lease.extend(step.ttl);
        // What the holder is told while the request is in flight (it may land at any moment).
        sample(held);
        await extending;
        emit({ ev: 'ext-ok', id: held.root, ttl: step.ttl, V: validity(lease) });
      } catch (error) {
        emit({ ev: 'ext-fail', id: held.root, ...errorInfo(error) });
      }
      return;
    case 'rmw': {
      let tx: (SqlTx & { end(how: PgTxEnd): void }) | undefined;
      if (step.tx && config.control === undefined) {
        try {
          tx = step.store === 'mysql' ? await registerMy.begin() : await beginPgTx();
        } catch (error) {
          emit({ ev: 'read', id: held.root, store: step.store, key: op.key, len: -1, result: 'fail', message: `BEGIN: ${errorInfo(error).message}` });
          return;
        }
      }
      let end: PgTxEnd = 'destroy';
      try {
        // A multi-key lease writes to one of its keys' registers; a leader to its name's.
        const key = step.key ?? op.key;
        const token = tokenFor(step.token, lease, svc, key, op.backend, op.ns);
        const list = await fencedRead(held, step.store, key, token, tx, op.ns);
        if (!list) return;
        if (step.thinkMs > 0) await sleep(step.thinkMs, drain.signal);
        if (step.checkSignal && lease.signal.aborted) {
          end = 'rollback';
          return;
        }
        const written = await fencedWrite(fiber, held, step.store, key, list, tokenFor(step.token, lease, svc, key, op.backend, op.ns), lease.token, tx, op.ns);
        if (written === 'ok') end = 'committed';
      } finally {
        tx?.end(end);
      }
      return;
    }
    case 'read': {
      const list = await fencedRead(held, step.store, op.key, tokenFor('explicit', lease, svc, op.key, op.backend));
      if (list) held.pending.set(step.store, list);
      return;
    }
    case 'write-outer': {
      const outer = chain.at(-1);
      const list = outer?.pending.get(step.store);
      if (!outer || !list) return;
      outer.pending.delete(step.store);
      // explicit: the outer lease's own token (right); implicit: whatever current() says here.
      const token = step.token === 'explicit' ? { pass: outer.lease.token, used: outer.lease.token } : tokenFor('implicit', lease, svc, outer.op.key, outer.op.backend);
      await fencedWrite(fiber, held, step.store, outer.op.key, list, token, outer.lease.token);
      return;
    }
    case 'nest':
      await runOp(fiber, step.op, [...chain, held]);
      sample(held);
      return;
    case 'work': {
      // Work given term.signal, as a leader's job would be: it stops when the signal aborts (or
      // its time is up, or the drain begins), and says so — the checker counts it as belief.
      const signal = lease.signal;
      const stop = AbortSignal.any([signal, drain.signal]);
      emit({ ev: 'work', id: held.root, phase: 'start' });
      const started = now();
      for (let round = 0; !signal.aborted && !draining && now() - started < step.ms; round++) {
        if (step.store && round % 4 === 0) {
          try {
            await runStep(fiber, { s: 'rmw', store: step.store, token: 'explicit', thinkMs: 0, checkSignal: true }, held, chain);
          } catch (error) {
            emit({ ev: 'note', message: `${held.id} work: ${errorInfo(error).message}` });
          }
        }
        await sleep(Math.max(0, Math.min(25, step.ms - (now() - started))), stop);
      }
      emit({ ev: 'work', id: held.root, phase: 'end', why: signal.aborted ? 'signal' : draining ? 'drain' : 'done' });
      sample(held);
      return;
    }
  }
}

async function fencedRead(held: Held, store: Store, key: number, token: { pass?: bigint; used?: bigint }, tx?: SqlTx, ns?: KeyNs): Promise<RegisterList | undefined> {
  try {
    const list = await readRegister(store, held.svc, key, token.pass, tx, ns);
    emit({ ev: 'read', id: held.root, store, key, ...(ns ? { ns } : {}), token: token.used?.toString(), len: list.length, result: 'ok' });
    return list;
  } catch (error) {
    emit({
      ev: 'read',
      id: held.root,
      store,
      key,
      ...(ns ? { ns } : {}),
      token: token.used?.toString(),
      len: -1,
      result: error instanceof StaleFencingTokenError ? 'stale' : 'fail',
      message: errorInfo(error).message,
    });
    return undefined;
  }
}

async function fencedWrite(
  fiber: number,
  held: Held,
  store: Store,
  key: number,
  list: RegisterList,
  token: { pass?: bigint; used?: bigint },
  leaseToken: bigint | undefined,
  tx?: SqlTx,
  ns?: KeyNs,
): Promise<WriteResult> {
  const el = `${config.worker}.${config.incarnation}.${fiber}.${elements++}`;
  const where = ns ? { ns } : {};
  const base = { ev: 'write' as const, id: held.root, store, key, ...where, el, token: token.used?.toString(), leaseToken: leaseToken?.toString() };
  emit({ ev: 'write-start', id: held.root, store, key, ...where, el, token: token.used?.toString() });
  try {
    await writeRegister(store, held.svc, key, [...list, [el, token.used?.toString() ?? null]], token.pass, tx, ns);
    emit({ ...base, result: 'ok' });
    return 'ok';
  } catch (error) {
    const result = classifyWrite(error);
    emit({ ...base, result, message: errorInfo(error).message });
    return result;
  }
}

/**
 * A MySqlTransactionLock holder (plan kind 'xact', plan-mysql.ts): START TRANSACTION on a register
 * connection, the key's MySQL lock taken in it (the first statement: REPEATABLE READ refuses a
 * snapshot older than the grant), the key's MySqlFence register read and written with its token,
 * then COMMIT, ROLLBACK or the connection closed. Its belief ('grant' … 'rel') has no ttl: it holds
 * until its COMMIT / ROLLBACK is sent, its connection is closed — or a statement fails (`lost`
 * from when that statement was sent: a deadlock rolls the whole transaction back, a killed session
 * ends it). A write not committed is `rolledback`: it must never be in the register.
 */
async function runXact(fiber: number, op: LockOp): Promise<void> {
  const x = op.xact!;
  const svc = locks;
  const id = `w${config.worker}.${config.incarnation}.${fiber}.${seq++}`;
  const lockKey = lockKeyName(config.runId, op.key, 'mysql');
  const name = registerName(config.runId, op.key, 'mysql');
  emit({ ev: 'req', id, key: op.key, purpose: op.purpose, backend: 'mysql', kind: 'xact', ttl: 0, wait: op.wait });
  let tx: Awaited<ReturnType<typeof registerMy.begin>> | undefined;
  // Again on another connection: after a KILL of the sessions or a restart the pool still hands out
  // the idle connections the server closed, one by one (the transaction is the point here, not the
  // pool's hygiene; it keeps 4).
  for (let attempt = 0; !tx; attempt++) {
    try {
      tx = await registerMy.begin(x.isolation === 'read-committed' ? 'read-committed' : undefined);
    } catch (error) {
      if (attempt < 4 && !draining && /closed|Connection lost/i.test(errorInfo(error).message)) continue;
      const info = errorInfo(error);
      emit({ ev: 'fail', id, name: info.name, message: `BEGIN: ${info.message}` });
      return;
    }
  }
  let token: bigint;
  try {
    // (The drain does not wait out `wait`: the connection goes, and the call with it.)
    let stop = (): void => undefined;
    const drained = new Promise<never>((_, reject) => {
      stop = (): void => reject(new Error('sim: draining'));
      if (drain.signal.aborted) stop();
      else drain.signal.addEventListener('abort', stop, { once: true });
    });
    drained.catch(() => undefined);
    try {
      token = await timeout(Promise.race([registerMy.txLock.acquire(tx.connection as unknown as MySqlTransactionClient, lockKey, { wait: op.wait }), drained]), op.wait + 4_000);
    } finally {
      drain.signal.removeEventListener('abort', stop);
    }
  } catch (error) {
    const info = errorInfo(error);
    // Busy leaves the transaction usable (a lock row it locked stays locked until it ends): roll back.
    if (info.name === 'LockBusyError') {
      emit({ ev: 'busy', id });
      tx.end('rollback');
    } else {
      emit({ ev: 'fail', id, ...info });
      tx.end('destroy');
    }
    return;
  }
  emit({ ev: 'grant', id, key: op.key, purpose: op.purpose, backend: 'mysql', token: token.toString(), reentrant: false, root: id, xact: true });
  let how: 'commit' | 'rollback' | 'destroy' = x.end;
  let sentAt = now();
  let written: { el: string; token: string } | undefined;
  const lost = (what: string, error: unknown): void => {
    emit({ ev: 'lost', id, reason: `xact ${what}: ${errorInfo(error).name}`, since: sentAt });
    how = 'destroy';
  };
  try {
    if (x.holdMs > 0) await sleep(x.holdMs, drain.signal);
    if (draining) how = 'rollback';
    else {
      let list: RegisterList | undefined;
      sentAt = now();
      try {
        list = JSON.parse((await registerMy.read(svc, name, token, tx)) ?? '[]') as RegisterList;
        emit({ ev: 'read', id, store: 'mysql', key: op.key, token: token.toString(), len: list.length, result: 'ok' });
      } catch (error) {
        emit({ ev: 'read', id, store: 'mysql', key: op.key, token: token.toString(), len: -1, result: error instanceof StaleFencingTokenError ? 'stale' : 'fail', message: errorInfo(error).message });
        lost('read', error);
      }
      if (list && x.write) {
        if (x.thinkMs > 0) await sleep(x.thinkMs, drain.signal);
        const el = `${config.worker}.${config.incarnation}.${fiber}.${elements++}`;
        emit({ ev: 'write-start', id, store: 'mysql', key: op.key, el, token: token.toString() });
        sentAt = now();
        try {
          await registerMy.update(svc, name, [...list, [el, token.toString()]], token, tx);
          written = { el, token: token.toString() };
        } catch (error) {
          // Refused, or no answer: either way it is never committed (no COMMIT follows).
          const result: WriteResult = error instanceof StaleFencingTokenError ? 'stale' : 'rolledback';
          emit({ ev: 'write', id, store: 'mysql', key: op.key, el, token: token.toString(), leaseToken: token.toString(), result, message: errorInfo(error).message });
          lost('write', error);
        }
      }
      if (how !== 'destroy' && x.endAfterMs > 0) await sleep(x.endAfterMs, drain.signal);
    }
  } finally {
    const base = written ? { ev: 'write' as const, id, store: 'mysql' as const, key: op.key, el: written.el, token: written.token, leaseToken: written.token } : undefined;
    emit({ ev: 'rel', id, how });
    if (how === 'commit') {
      try {
        await timeout(tx.connection.query('COMMIT'), 1_500);
        tx.end('committed');
        emit({ ev: 'rel-done', id, ok: true });
        if (base) emit({ ...base, result: 'ok' });
      } catch (error) {
        tx.end('destroy');
        emit({ ev: 'rel-done', id, ok: false, message: errorInfo(error).message });
        // An unanswered COMMIT: committed or not.
        if (base) emit({ ...base, result: 'unknown', message: `COMMIT: ${errorInfo(error).message}` });
      }
    } else {
      tx.end(how);
      emit({ ev: 'rel-done', id, ok: true });
      if (base) emit({ ...base, result: 'rolledback' });
    }
  }
}

async function fiberLoop(fiber: number, ops: FiberOp[]): Promise<void> {
  for (const op of ops) {
    if (draining) return;
    await appUp;
    if (draining) return;
    if (op.kind === 'sleep') await sleep(op.ms, drain.signal);
    else if (op.kind === 'force') await runForce(fiber, op.target, op.inspect);
    else if (op.kind === 'xact') await runXact(fiber, op);
    else await runOp(fiber, op, []);
  }
}

// ---------------------------------------------------------------- internal sizes (invariant 5)

/**
 * What the engine and each backend keep per lease, owner and key, read through their documented
 * `bookkeeping()` (LockBackend.bookkeeping, LockEngine.bookkeeping): `<backend>.<record>` → its
 * entries. Never silently nothing: a backend without it, or without the records every queueing
 * backend keeps, fails the run here.
 */
function records(): Map<string, readonly string[]> {
  const out = new Map<string, readonly string[]>();
  const engine = app!.get(LockEngine);
  for (const [name, entries] of Object.entries(engine.bookkeeping())) out.set(`engine.${name}`, entries);
  const backends = backendsOf(app!);
  if (backends.size === 0) throw new Error('sim: no backends found to check for leaks (invariant 5)');
  for (const [name, backend] of backends) {
    if (!backend.bookkeeping) throw new Error(`sim: backend "${name}" has no bookkeeping() to check for leaks (invariant 5)`);
    for (const [record, entries] of Object.entries(backend.bookkeeping())) out.set(`${name}.${record}`, entries);
  }
  const redlockMasters = Array.from({ length: config.redlockUrls.length }, (_, i) => `redlock.master[${i}].waiters`);
  const required = ['engine.held', 'redis.waiters', 'etcd.holders', 'etcd.queue', 'postgres.waiters', 'mysql.waiters', 'zookeeper.turns', 'zookeeper.nodes', 'zookeeper.lineCache', 'redlock.turns', 'redlock.lines', 'redlock.held', ...redlockMasters];
  for (const name of required) if (!out.has(name)) throw new Error(`sim: ${name} was not reported to check for leaks (invariant 5) — update records()`);
  return out;
}

function sizes(): Record<string, number> {
  const out: Record<string, number> = Object.fromEntries([...records()].map(([name, entries]) => [name, entries.length]));
  out['service.events.listeners'] = locks.events.eventNames().reduce((n, e) => n + locks.events.listenerCount(e), 0);
  return out;
}

async function settledSizes(baseline: Record<string, number>): Promise<{ sizes: Record<string, number>; settledMs: number; above: Record<string, number> }> {
  const started = now();
  let current = sizes();
  // Back to the baseline (per-key caches: within the keys this seed uses).
  const over = (s: Record<string, number>): Array<[string, number]> =>
    Object.entries(s).filter(([name, n]) => n > (baseline[name] ?? 0) + (isKeyCache(name) ? 2 * config.keys : 0));
  const settled = (s: Record<string, number>): boolean => over(s).length === 0;
  const above = Object.fromEntries(over(current));
  while (!settled(current) && now() - started < 12_000) {
    await sleep(100);
    current = sizes();
  }
  return { sizes: current, settledMs: now() - started, above };
}

async function warmUp(): Promise<void> {
  // One queued wait per backend (Redlock: a waiter that retries): opens the Redis subscriber, the
  // etcd session and every Redlock master's connection, so the baseline is taken with every
  // connection the module keeps. A (re)started worker may come up in the middle of a server
  // fault: retry for a while.
  for (const [purpose, backend] of [['efficiency'], ['correctness'], ['correctness', 'postgres'], ['correctness', 'mysql'], ['correctness', 'zookeeper'], ['efficiency', 'redlock']] as const) {
    const key = `${config.runId}/warm-w${config.worker}.${config.incarnation}${backend ? `/${backend}` : ''}`;
    const on = backend ? { backend } : {};
    for (let attempt = 0; ; attempt++) {
      try {
        const first = await locks.acquire(key, { purpose, ttl: 5_000, wait: 5_000, ...on });
        const second = locks.acquire(key, { purpose, ttl: 5_000, wait: 5_000, ...on });
        await sleep(50);
        await first.release();
        await (await second).release();
        break;
      } catch (error) {
        if (attempt >= 20) throw error;
        await sleep(500);
      }
    }
  }
}

/** Sockets among the active handles, by remote port (the controller names the proxies). */
function sockets(): string[] {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.flatMap((h) => {
    const socket = h as { remotePort?: number; localPort?: number; constructor?: { name?: string } };
    return socket.constructor?.name === 'Socket' && socket.remotePort !== undefined
      ? [`socket to :${socket.remotePort}${process.env.SIM_DEBUG ? ` from :${socket.localPort} opened at ${socketOrigins.get(socket as object)}` : ''}`]
      : [];
  });
}

// ---------------------------------------------------------------- main

async function probe(): Promise<void> {
  await startApp();
  const p = config.probe!;
  await Promise.all(
    p.locks.map(async ({ key, purpose, backend, ns, permits, boundMs }) => {
      const where = { ...(backend ? { backend } : {}), ...(ns ? { ns } : {}) };
      try {
        const wait = Math.ceil(Math.max(1_000, boundMs - (now() - p.since) + 3_000));
        const name = lockKeyName(config.runId, key, backend, ns);
        const on = backend ? { backend } : {};
        let held: Lease[];
        if (ns === 'leader') {
          // The leader name: a campaign of its own (a candidate waits without end: the deadline is the signal).
          held = [await locks.campaign(name, { purpose, ttl: 1_000, signal: AbortSignal.timeout(wait), ...on })];
        } else if (permits !== undefined && permits > 1) {
          // A semaphore: every permit must come back (one leaked holder would keep one forever).
          const settled = await Promise.allSettled(Array.from({ length: permits }, () => locks.acquire(name, { purpose, ttl: 3_000, wait, permits, ...on })));
          held = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
          const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
          if (failed) {
            await Promise.all(held.map((l) => l.release()));
            throw failed.reason;
          }
        } else {
          held = [await locks.acquire(name, { purpose, ttl: 1_000, wait, ...on })];
        }
        emit({ ev: 'probe', key, purpose, ...where, ok: true, elapsedMs: now() - p.since });
        await Promise.all(held.map((l) => l.release()));
      } catch (error) {
        emit({ ev: 'probe', key, purpose, ...where, ok: false, elapsedMs: now() - p.since, message: errorInfo(error).message });
      }
    }),
  );
  // The leader name's registers (whichever backend it is on: an unwritten one is null).
  for (const store of ['redis', 'etcd', 'zookeeper', 'postgres', 'mysql'] as const) {
    const name = registerName(config.runId, 0, store, 'leader');
    const parse = (raw: string | null | undefined): RegisterList | null => (raw ? (JSON.parse(raw) as RegisterList) : null);
    let raw: string | null | undefined;
    if (store === 'redis') raw = await registerRedis.hget(REDIS_FENCE_PREFIX + name, 'v');
    else if (store === 'postgres') raw = (await registerPg.query(`SELECT v FROM ${PG_REGISTER_TABLE} WHERE id = $1`, [name])).rows[0]?.v as string | undefined;
    else if (store === 'mysql') raw = JSON.stringify(await registerMy.value(name));
    else raw = await registerEtcd.get(ETCD_FENCE_PREFIX + encodeURIComponent(name)).string();
    emit({ ev: 'register', store, key: 0, ns: 'leader', list: parse(raw) });
  }
  for (let key = 0; key < config.keys; key++) {
    const parse = (raw: string | null | undefined): RegisterList | null => (raw ? (JSON.parse(raw) as RegisterList) : null);
    const redisName = registerName(config.runId, key, 'redis');
    const etcdName = registerName(config.runId, key, 'etcd');
    emit({ ev: 'register', store: 'redis', key, list: parse(await registerRedis.hget(REDIS_FENCE_PREFIX + redisName, 'v')) });
    emit({ ev: 'register', store: 'etcd', key, list: parse(await registerEtcd.get(ETCD_FENCE_PREFIX + encodeURIComponent(etcdName)).string()) });
    const zkName = registerName(config.runId, key, 'zookeeper');
    emit({ ev: 'register', store: 'zookeeper', key, list: parse(await registerEtcd.get(ETCD_FENCE_PREFIX + encodeURIComponent(zkName)).string()) });
    emit({ ev: 'register', store: 'plain', key, list: parse(await registerRedis.get(PLAIN_PREFIX + redisName)) });
    const row = await registerPg.query(`SELECT v FROM ${PG_REGISTER_TABLE} WHERE id = $1`, [registerName(config.runId, key, 'postgres')]);
    emit({ ev: 'register', store: 'postgres', key, list: parse(row.rows[0]?.v as string | undefined) });
    emit({ ev: 'register', store: 'mysql', key, list: await registerMy.value(registerName(config.runId, key, 'mysql')) });
  }
  await app?.close();
  closeAppRedisClient();
  registerRedis.disconnect();
  registerEtcd.close();
  await registerPg.end();
  await registerMy.end();
  emit({ ev: 'drained' });
  process.disconnect?.();
}

async function main(): Promise<void> {
  if (config.role === 'probe') return probe();
  await startApp();
  await warmUp();
  const baseline = sizes();
  emit({ ev: 'sizes', phase: 'baseline', sizes: baseline, settledMs: 0 });
  if (process.env.SIM_DEBUG) emit({ ev: 'note', message: `baseline sizes: ${JSON.stringify(baseline)}` });
  let fibers: Promise<void> | undefined;
  process.on('message', (message: WorkerCommand) => {
    if (message.cmd === 'go') {
      fibers = Promise.all(config.fibers.map((ops, f) => fiberLoop(f, ops))).then(() => undefined);
    } else if (message.cmd === 'close-app') {
      void restartApp(message.downMs).catch((error) => emit({ ev: 'note', message: `restart failed: ${errorInfo(error).message}` }));
    } else if (message.cmd === 'watch') {
      inBackground(runWatch(message));
    } else if (message.cmd === 'unwatch') {
      const watch = watches.get(message.id);
      if (watch) watch.stop = true;
    } else if (message.cmd === 'drain') {
      draining = true;
      drain.abort(new Error('sim: draining'));
      void (async () => {
        await fibers;
        while (background.size > 0) await Promise.all([...background]);
        await appUp;
        const { sizes: final, settledMs, above } = await settledSizes(baseline);
        explainLeftovers(baseline);
        emit({ ev: 'sizes', phase: 'final', sizes: final, settledMs, above });
        // Slow to settle (not a violation while within the wait): say what was above the baseline.
        if (settledMs > 2_000) emit({ ev: 'note', message: `internal sizes settled after ${settledMs.toFixed(0)} ms; above the baseline when the calls had finished: ${JSON.stringify(above)}` });
        emit({ ev: 'drained' });
      })();
    } else if (message.cmd === 'exit') {
      void (async () => {
        await app?.close();
        closeAppRedisClient();
        registerRedis.disconnect();
        registerEtcd.close();
        await registerPg.end().catch(() => undefined);
        await registerMy.end().catch(() => undefined);
        // What still keeps the event loop alive beyond what a fresh process had (and the IPC
        // channel, referenced while we listen to it): leaked handles.
        const active = (): string[] => difference(process.getActiveResourcesInfo(), [...pristine, 'PipeWrap']);
        // The documented bound: a request pending at close() ends within commandTimeoutMs + 2.5 s
        // (its gRPC deadline); etcd's commandTimeoutMs here is 1 s. Anything later is a leak.
        const started = now();
        let leaked = active();
        while (leaked.length > 0 && now() - started < 1_000 + 2_500 + 500) {
          await sleep(100);
          leaked = active();
        }
        emit({ ev: 'exit-resources', leaked: leaked.length ? [...leaked, ...sockets()] : [] });
        if (process.env.SIM_DEBUG) {
          for (const { resource, stack } of timerOrigins.values()) {
            if (resource.hasRef?.() && !/at sleep \(/.test(stack)) emit({ ev: 'note', message: `ref'd timer created at ${stack}` });
          }
          for (const [i, a] of debugApps.entries()) {
            const r = (a.backends as Map<string, { client?: { status?: string; stream?: { localPort?: number } }; subscriber?: { status?: string }; closed?: boolean }>).get('redis');
            emit({ ev: 'note', message: `app #${i} (started ${a.startedAt.toFixed(0)}): redis backend closed=${r?.closed} client ${r?.client?.status} :${r?.client?.stream?.localPort}, subscriber ${r?.subscriber?.status}` });
            const e = (a.backends as Map<string, { client?: { watchManager?: { state: number; watchers: unknown[]; expectedClosers: Set<unknown> } }; queued?: Map<string, unknown> }>).get('etcd');
            const wm = e?.client?.watchManager;
            emit({ ev: 'note', message: `app #${i}: etcd backend queued ${e?.queued?.size}, watch manager state ${wm?.state} (0 idle, 1 connecting, 2 connected), ${wm?.watchers.length} watchers, ${wm?.expectedClosers.size} closing` });
          }
          for (const [client, stack] of redisInstances) {
            const c = client as { status?: string; stream?: { localPort?: number } };
            if (c.status !== 'end') emit({ ev: 'note', message: `redis client ${c.status} from :${c.stream?.localPort} created at ${stack}` });
          }
        }
        // Exit on our own: anything still referenced would keep us alive (the controller sees it).
        setTimeout(() => process.exit(3), 5_000).unref();
        process.disconnect?.();
      })();
    }
  });
  emit({ ev: 'ready' });
}

function difference(now: string[], before: string[]): string[] {
  const left = [...before];
  const out: string[] = [];
  for (const r of now) {
    const i = left.indexOf(r);
    if (i >= 0) left.splice(i, 1);
    else out.push(r);
  }
  return out;
}

void main().catch((error) => {
  emit({ ev: 'note', message: `worker failed: ${errorInfo(error).message}` });
  process.exitCode = 2;
  process.disconnect?.();
});
