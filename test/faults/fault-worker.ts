// A worker process of the fault suite: loops acquire → read-modify-write of a shared register →
// release, and reports every step to the controller over IPC. It is deliberately naive: it does
// not look at lease.signal before writing, as a process paused at the wrong moment could not
// either — only the resource's fence (when there is one) stands between it and a stale write.
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import { DistributedLockModule, DistributedLockService, RedisFence, StaleFencingTokenError, type Lease } from '../../lib/index.js';
import type { HistoryEvent } from './checker.js';
import { wallNow } from '../simulation/clock.js';

export interface FaultWorkerConfig {
  id: number;
  backend: 'etcd' | 'redis';
  fenced: boolean;
  etcdHosts?: string[];
  sessionTtlSeconds?: number;
  lockRedisUrl?: string;
  registerRedisUrl: string;
  key: string;
  register: string;
  ttl: number;
  workMs: number;
}

type Report = Omit<HistoryEvent, 't' | 'worker'>;
// Stamped here, with a wall clock the processes on this machine agree on: the time the controller
// receives a message can lag by most of a second under load (seen: one worker's first grant
// arriving after another's later ones), which made the order checks see regressions that never
// happened. A worker under faketime has no trustworthy clock: the controller stamps its events.
const stamp = process.env.FAULT_CLOCK_SKEWED ? (): number | undefined => undefined : wallNow;
const send = (event: Report): void => void process.send?.({ ...event, at: stamp() });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const config = JSON.parse(process.env.FAULT_WORKER!) as FaultWorkerConfig;
  const lockOptions =
    config.backend === 'etcd'
      ? { etcd: { hosts: config.etcdHosts!, sessionTtlSeconds: config.sessionTtlSeconds ?? 1, commandTimeoutMs: 1_000 } }
      : { redis: { url: config.lockRedisUrl!, connectTimeoutMs: 500, commandTimeoutMs: 500 } };
  @Module({ imports: [DistributedLockModule.forRoot(lockOptions)] })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: false });
  const locks = app.get(DistributedLockService);
  // A write that cannot get through within a second is reported as of unknown outcome.
  const register = new Redis(config.registerRedisUrl, { commandTimeout: 1_000, maxRetriesPerRequest: 1 });
  register.on('error', () => undefined);
  const fence = new RedisFence(register, { keyPrefix: 'faults:' });
  const purpose = config.backend === 'etcd' ? 'correctness' : 'efficiency';

  let stopping = false;
  process.on('message', (message: { op: string }) => {
    if (message.op === 'stop') stopping = true;
  });
  process.send?.({ e: 'ready' });

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
    send({ e: 'acquired', token });
    lease.signal.addEventListener('abort', () => send({ e: 'lost', reason: (lease.signal.reason as { reason?: string }).reason }));
    const el = `w${config.id}-${n}`;
    let phase: 'read' | 'write' = 'read';
    try {
      const raw = config.fenced ? await fence.read(config.register, lease.token!) : await register.get(`faults:plain:${config.register}`);
      const list = JSON.parse(raw ?? '[]') as Array<[string, string | null]>;
      send({ e: 'read', token });
      phase = 'write';
      await sleep(config.workMs);
      const next = JSON.stringify([...list, [el, token ?? null]]);
      if (config.fenced) await fence.write(config.register, next, lease.token!);
      else await register.set(`faults:plain:${config.register}`, next);
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
  register.disconnect();
  await app.close();
  process.exit(0);
}

void main();
