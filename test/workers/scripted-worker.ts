// Adversarial review (round 3, adv2): a lock user in its own process with module options from the
// parent (WORKER_OPTIONS, JSON), so a spec can set commandTimeoutMs, session ttls and the like.
// Runs from the compiled output (.tmp/compiled/test/workers/scripted-worker.js).
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockModule, DistributedLockService, type Lease } from '../../lib/index.js';

export type Adv2Command =
  | { op: 'acquire'; id: string; key: string | string[]; opts: Record<string, unknown> }
  | { op: 'campaign'; id: string; name: string; opts: Record<string, unknown> }
  | { op: 'status'; id: string }
  | { op: 'release'; id: string }
  | { op: 'close' };

export type Adv2Event =
  | { event: 'ready' }
  | { event: 'waiting'; id: string }
  | { event: 'acquired'; id: string; token?: string; remainingMs: number; at: number }
  | { event: 'failed'; id: string; name: string; message: string; at: number }
  | { event: 'lost'; id: string; reason: string; at: number }
  | { event: 'status'; id: string; held: boolean; aborted: boolean; remainingMs: number; token?: string }
  | { event: 'released'; id: string }
  | { event: 'closed'; ms: number };

const send = (message: Adv2Event): void => void process.send?.(message);

async function main(): Promise<void> {
  const options = JSON.parse(process.env.WORKER_OPTIONS ?? '{}');
  @Module({ imports: [DistributedLockModule.forRoot(options)] })
  class WorkerModule {}
  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: false });
  const locks = app.get(DistributedLockService);
  const leases = new Map<string, Lease>();
  process.on('message', (command: Adv2Command) => {
    void (async () => {
      if (command.op === 'close') {
        const t = Date.now();
        await app.close();
        send({ event: 'closed', ms: Date.now() - t });
        process.exit(0);
      }
      if (command.op === 'status') {
        const lease = leases.get(command.id);
        send({
          event: 'status',
          id: command.id,
          held: lease !== undefined,
          aborted: lease?.signal.aborted ?? true,
          remainingMs: lease?.remainingMs() ?? 0,
          token: lease?.token?.toString(),
        });
        return;
      }
      if (command.op === 'release') {
        await leases.get(command.id)?.release().catch(() => undefined);
        leases.delete(command.id);
        send({ event: 'released', id: command.id });
        return;
      }
      try {
        const pending =
          command.op === 'acquire'
            ? locks.acquire(command.key, command.opts as never)
            : locks.campaign(command.name, command.opts as never);
        send({ event: 'waiting', id: command.id });
        const lease = await pending;
        leases.set(command.id, lease);
        lease.signal.addEventListener('abort', () =>
          send({ event: 'lost', id: command.id, reason: (lease.signal.reason as { reason?: string }).reason ?? 'unknown', at: Date.now() }),
        );
        send({ event: 'acquired', id: command.id, token: lease.token?.toString(), remainingMs: lease.remainingMs(), at: Date.now() });
      } catch (error) {
        send({ event: 'failed', id: command.id, name: (error as Error).name, message: (error as Error).message, at: Date.now() });
      }
    })();
  });
  send({ event: 'ready' });
}

void main();
