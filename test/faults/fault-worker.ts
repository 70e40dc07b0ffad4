// A worker process of the fault suite: loops acquire → read-modify-write of a shared register →
// release, and reports every step to the controller over IPC. It is deliberately naive: it does
// not look at lease.signal before writing, as a process paused at the wrong moment could not
// either — only the resource's fence (when there is one) stands between it and a stale write.
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { DistributedLockModule, DistributedLockService, MySqlFence, PgFence, RedisFence, StaleFencingTokenError, type Lease, type MySqlQueryable } from '../../lib/index.js';
import type { HistoryEvent } from './checker.js';
import { MYSQL_REGISTER_TABLE } from './mysql-register.js';
import { PG_REGISTER_TABLE } from './pg-register.js';
import { wallNow } from '../simulation/clock.js';

export interface FaultWorkerConfig {
  id: number;
  backend: 'etcd' | 'redis' | 'postgres' | 'mysql' | 'zookeeper' | 'redlock';
  fenced: boolean;
  /** ZooKeeper scenarios: the connection string and the session timeout to ask for. */
  zookeeper?: string;
  zkSessionMs?: number;
  etcdHosts?: string[];
  sessionTtlSeconds?: number;
  lockRedisUrl?: string;
  /** Redlock scenarios: the five masters. */
  redlockUrls?: string[];
  /** Redis register (etcd and Redis scenarios). */
  registerRedisUrl?: string;
  /** PostgreSQL scenarios: the lock backend and the register table are in this one database. */
  postgresUrl?: string;
  /** MySQL scenarios (MariaDB): the lock backend and the register table are in this one database. */
  mysqlUrl?: string;
  key: string;
  register: string;
  ttl: number;
  workMs: number;
  /**
   * `lock` (default): acquire → read-modify-write → release. `semaphore`: acquire with `permits`
   * → report `read`, work, report `act` (no check of the signal first) → release. `leader`:
   * campaign → while leading, a fenced read-modify-write of the register every `workMs` → on loss,
   * campaign again; SIGTERM steps down through `app.close()`.
   */
  mode?: 'lock' | 'semaphore' | 'leader';
  permits?: number;
}

type Report = Omit<HistoryEvent, 't' | 'worker'>;
// Stamped here, with a wall clock the processes on this machine agree on: the time the controller
// receives a message can lag by most of a second under load (seen: one worker's first grant
// arriving after another's later ones), which made the order checks see regressions that never
// happened. A worker under faketime has no trustworthy clock: the controller stamps its events.
const skewed = Boolean(process.env.FAULT_CLOCK_SKEWED);
const stamp = skewed ? (): number | undefined => undefined : wallNow;
const send = (event: Report): void => void process.send?.({ ...event, at: stamp() });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A write that cannot get through within a second is reported as of unknown outcome. */
const OUTCOME_MS = 1_000;

/** The register as a worker sees it: reads and writes guarded by its lease's token when fenced. */
interface Register {
  read(token: bigint | undefined): Promise<string | null>;
  /** `late`: told the outcome of a write that timed out, if it arrives (PostgreSQL and MySQL only). */
  write(value: string, token: bigint | undefined, late: (outcome: 'write-ok' | 'write-stale') => void): Promise<void>;
  close(): Promise<void>;
}

class OutcomeUnknownError extends Error {}

/** `work`, or OutcomeUnknownError after OUTCOME_MS — `work` goes on: it may still be applied, late. */
function withinOutcome<T>(work: Promise<T>): Promise<T> {
  let timer!: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new OutcomeUnknownError(`no answer within ${OUTCOME_MS} ms`)), OUTCOME_MS);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

function redisRegister(config: FaultWorkerConfig): Register {
  const client = new Redis(config.registerRedisUrl!, { commandTimeout: OUTCOME_MS, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  const fence = new RedisFence(client, { keyPrefix: 'faults:' });
  return {
    read: (token) => (config.fenced ? fence.read(config.register, token!) : client.get(`faults:plain:${config.register}`)),
    write: async (value, token) => {
      if (config.fenced) await fence.write(config.register, value, token!);
      else await client.set(`faults:plain:${config.register}`, value);
    },
    close: async () => void client.disconnect(),
  };
}

/**
 * The register as a row of PG_REGISTER_TABLE, read and written through PgFence (a read raises the
 * fence to the reader's token). A statement that times out here is not cancelled: it stays on its
 * connection and may reach the server late (after a blackhole heals) — the fence must refuse it.
 */
function postgresRegister(config: FaultWorkerConfig): Register {
  const pool = new pg.Pool({ connectionString: config.postgresUrl, max: 4, connectionTimeoutMillis: OUTCOME_MS });
  pool.on('error', () => undefined);
  const fence = new PgFence({ table: PG_REGISTER_TABLE });
  return {
    read: async (token) => (await withinOutcome(fence.read(pool, config.register, token!))).v as string,
    write: async (value, token, late) => {
      const applying = fence.update(pool, config.register, { v: value }, token!);
      try {
        await withinOutcome(applying);
      } catch (error) {
        if (error instanceof OutcomeUnknownError) {
          applying.then(
            () => late('write-ok'),
            (lateError: unknown) => lateError instanceof StaleFencingTokenError && late('write-stale'),
          );
        }
        throw error;
      }
    },
    close: () => Promise.race([pool.end(), sleep(2_000)]),
  };
}

/**
 * The register as a row of MYSQL_REGISTER_TABLE, read and written through MySqlFence on a mysql2
 * pool (each statement commits alone: the UPDATE's own guard is the check). As on PostgreSQL, a
 * call that times out here is not cancelled: its statements may reach the server late — the fence
 * must refuse them.
 */
function mysqlRegister(config: FaultWorkerConfig): Register {
  const pool = mysql.createPool({ uri: config.mysqlUrl!, connectionLimit: 4, connectTimeout: OUTCOME_MS });
  (pool as unknown as { on(event: string, f: () => void): void }).on('error', () => undefined);
  const db = pool as unknown as MySqlQueryable;
  const fence = new MySqlFence({ table: MYSQL_REGISTER_TABLE });
  return {
    read: async (token) => (await withinOutcome(fence.read(db, config.register, token!))).v as string,
    write: async (value, token, late) => {
      const applying = fence.update(db, config.register, { v: value }, token!);
      try {
        await withinOutcome(applying);
      } catch (error) {
        if (error instanceof OutcomeUnknownError) {
          applying.then(
            () => late('write-ok'),
            (lateError: unknown) => lateError instanceof StaleFencingTokenError && late('write-stale'),
          );
        }
        throw error;
      }
    },
    close: () => Promise.race([pool.end(), sleep(2_000)]),
  };
}

/**
 * The lock Redis' client: the module's own ioredis from the URL, or (FAULT_REDIS_CLIENT, `npm run
 * test:faults` with it set) the application's node-redis or iovalkey client.
 */
async function redisOptions(url: string): Promise<NonNullable<Parameters<typeof DistributedLockModule.forRoot>[0]['redis']>> {
  const timeouts = { connectTimeoutMs: 500, commandTimeoutMs: 500 };
  const kind = process.env.FAULT_REDIS_CLIENT;
  if (kind === 'node-redis') {
    const { createClient } = await import('redis');
    const client = createClient({ url, socket: { reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 500) } }).on('error', () => undefined);
    return { client: await client.connect(), ...timeouts };
  }
  if (kind === 'iovalkey') {
    const { Redis: Valkey } = await import('iovalkey');
    return { client: new Valkey(url).on('error', () => undefined), ...timeouts };
  }
  if (kind !== undefined && kind !== '' && kind !== 'ioredis') throw new Error(`FAULT_REDIS_CLIENT: node-redis, iovalkey or ioredis, got ${kind}`);
  return { url, ...timeouts };
}

async function lockOptions(config: FaultWorkerConfig): Promise<Parameters<typeof DistributedLockModule.forRoot>[0]> {
  if (config.backend === 'etcd') return { etcd: { hosts: config.etcdHosts!, sessionTtlSeconds: config.sessionTtlSeconds ?? 1, commandTimeoutMs: 1_000 } };
  if (config.backend === 'zookeeper') return { zookeeper: { connectionString: config.zookeeper!, sessionTimeoutMs: config.zkSessionMs ?? 1_000, commandTimeoutMs: 1_000, connectTimeoutMs: 2_000 } };
  if (config.backend === 'postgres') return { postgres: { connectionString: config.postgresUrl!, connectTimeoutMs: 1_000, commandTimeoutMs: 1_000 } };
  if (config.backend === 'mysql') return { mysql: { uri: config.mysqlUrl!, connectTimeoutMs: 1_000, commandTimeoutMs: 1_000 } };
  if (config.backend === 'redlock') return { redlock: { urls: config.redlockUrls! } };
  return { redis: await redisOptions(config.lockRedisUrl!) };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.FAULT_WORKER!) as FaultWorkerConfig;
  const options = await lockOptions(config);
  @Module({ imports: [DistributedLockModule.forRoot(options)] })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: false });
  const locks = app.get(DistributedLockService);
  const register = config.backend === 'postgres' ? postgresRegister(config) : config.backend === 'mysql' ? mysqlRegister(config) : redisRegister(config);
  const purpose = config.backend === 'redis' || config.backend === 'redlock' ? 'efficiency' : 'correctness';

  let stopping = false;
  const stop = new AbortController();
  process.on('message', (message: { op: string }) => {
    if (message.op === 'stop') {
      stopping = true;
      stop.abort();
    }
  });
  if (config.mode === 'leader') {
    process.on('SIGTERM', () => {
      // A graceful stop: the application closes, which hands leadership on at once.
      stopping = true;
      send({ e: 'releasing' });
      void app.close().then(() => {
        send({ e: 'released' });
        process.exit(0);
      });
    });
  }
  process.send?.({ e: 'ready' });
  if (config.mode === 'semaphore') return semaphoreLoop(config, locks, () => stopping, app, register);
  if (config.mode === 'leader') return leaderLoop(config, locks, () => stopping, stop.signal, app, register);

  for (let n = 0; !stopping; n++) {
    send({ e: 'acquiring' });
    let lease: Lease;
    try {
      lease = await locks.acquire(config.key, { purpose, ttl: config.ttl, wait: 5_000 });
    } catch (error) {
      send({ e: 'error', reason: (error as Error).name });
      await sleep(50);
      continue;
    }
    const token = lease.token?.toString();
    send({ e: 'acquired', token, validUntil: skewed ? undefined : wallNow() + lease.remainingMs() });
    lease.signal.addEventListener('abort', () => send({ e: 'lost', reason: (lease.signal.reason as { reason?: string }).reason }));
    const el = `w${config.id}-${n}`;
    let phase: 'read' | 'write' = 'read';
    try {
      const raw = await register.read(lease.token);
      const list = JSON.parse(raw ?? '[]') as Array<[string, string | null]>;
      send({ e: 'read', token });
      phase = 'write';
      await sleep(config.workMs);
      const next = JSON.stringify([...list, [el, token ?? null]]);
      // A write that timed out and lands (or is refused) later is reported then, as such.
      await register.write(next, lease.token, (outcome) => send({ e: outcome, el, token, reason: 'late' }));
      send({ e: 'write-ok', el, token });
    } catch (error) {
      if (error instanceof StaleFencingTokenError) send({ e: phase === 'read' ? 'read-stale' : 'write-stale', el, token });
      else if (phase === 'write') send({ e: 'write-unknown', el, token, reason: (error as Error).message });
      else send({ e: 'error', reason: (error as Error).message });
    }
    send({ e: 'releasing', token });
    await lease.release().catch(() => undefined);
    send({ e: 'released', token });
  }
  await register.close();
  await app.close();
  process.exit(0);
}

/** `validUntil` as the engine sees it now (a skewed worker has no trustworthy clock: left out). */
const validUntilOf = (lease: Lease): number | undefined => (skewed ? undefined : wallNow() + lease.remainingMs());

async function semaphoreLoop(config: FaultWorkerConfig, locks: DistributedLockService, stopping: () => boolean, app: { close(): Promise<void> }, register: Register): Promise<void> {
  const purpose = config.backend === 'redis' ? 'efficiency' : 'correctness';
  while (!stopping()) {
    send({ e: 'acquiring' });
    let lease: Lease;
    try {
      lease = await locks.acquire(config.key, { purpose, ttl: config.ttl, wait: 5_000, permits: config.permits });
    } catch (error) {
      send({ e: 'error', reason: (error as Error).name });
      await sleep(50);
      continue;
    }
    const token = lease.token?.toString();
    send({ e: 'acquired', token, validUntil: validUntilOf(lease) });
    lease.signal.addEventListener('abort', () => send({ e: 'lost', token, reason: (lease.signal.reason as { reason?: string }).reason }));
    // `read`: the controller's cue that this worker holds a permit and is about to work.
    send({ e: 'read', token });
    await sleep(config.workMs);
    // Deliberately naive: acts without looking at its signal, as a paused process would.
    send({ e: 'act', token });
    send({ e: 'releasing', token });
    await lease.release().catch(() => undefined);
    send({ e: 'released', token });
  }
  await register.close();
  await app.close();
  process.exit(0);
}

async function leaderLoop(
  config: FaultWorkerConfig,
  locks: DistributedLockService,
  stopping: () => boolean,
  stop: AbortSignal,
  app: { close(): Promise<void> },
  register: Register,
): Promise<void> {
  const purpose = config.backend === 'redis' ? 'efficiency' : 'correctness';
  let term: Lease | undefined;
  // Each renewal moves the term's validity end: reported, so the checker sees the engine's view.
  locks.events.on('renewed', (ev) => {
    if (ev.key === config.key && term && !term.signal.aborted) send({ e: 'renewed', token: term.token?.toString(), validUntil: validUntilOf(term) });
  });
  for (let n = 0; !stopping(); ) {
    send({ e: 'acquiring' });
    try {
      term = await locks.campaign(config.key, { purpose, ttl: config.ttl, signal: stop });
    } catch (error) {
      if (!stopping()) send({ e: 'error', reason: (error as Error).name });
      await sleep(50);
      continue;
    }
    const lease = term;
    const token = lease.token?.toString();
    send({ e: 'acquired', token, validUntil: validUntilOf(lease) });
    lease.signal.addEventListener('abort', () => send({ e: 'lost', token, reason: (lease.signal.reason as { reason?: string }).reason }));
    // While leading: a fenced read-modify-write every workMs. The check of the signal is at the top
    // of the round only — a leader paused between its read and its write writes late, with its
    // old term's token, as a real one would: the fence must refuse it.
    while (!lease.signal.aborted && !stopping()) {
      const el = `w${config.id}-${n++}`;
      let phase: 'read' | 'write' = 'read';
      try {
        const raw = await register.read(lease.token);
        const list = JSON.parse(raw ?? '[]') as Array<[string, string | null]>;
        send({ e: 'read', token, validUntil: validUntilOf(lease) });
        phase = 'write';
        await sleep(80);
        // A graceful stop abandons the round (the application is closing: its term is handed on).
        if (stopping()) break;
        await register.write(JSON.stringify([...list, [el, token ?? null]]), lease.token, (outcome) => send({ e: outcome, el, token, reason: 'late' }));
        send({ e: 'write-ok', el, token });
      } catch (error) {
        if (error instanceof StaleFencingTokenError) send({ e: phase === 'read' ? 'read-stale' : 'write-stale', el, token });
        else if (phase === 'write') send({ e: 'write-unknown', el, token, reason: (error as Error).message });
        else send({ e: 'read-failed', reason: (error as Error).message });
      }
      await sleep(config.workMs);
    }
    if (stopping()) break;
    // Lost: it holds nothing from here (the release of a lost term is a no-op for the key).
    send({ e: 'releasing', token });
    await lease.release().catch(() => undefined);
    send({ e: 'released', token });
  }
  await term?.release().catch(() => undefined);
  await register.close();
  await app.close();
  process.exit(0);
}

void main();
