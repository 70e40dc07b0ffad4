import { MODULE_OPTIONS } from '../../common/checks.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { ResolvedEtcdOptions } from './etcd-backend.options.js';
import type { EtcdClientLike } from './etcd-client.interface.js';

/** Open the client `forRoot({ etcd: { hosts } })` asks for (etcd3 is loaded only here). */
export async function createEtcdClient(o: ResolvedEtcdOptions, field: string): Promise<EtcdClientLike> {
  let etcd3: { Etcd3: new (options: Record<string, unknown>) => EtcdClientLike };
  try {
    etcd3 = (await import('etcd3')) as unknown as typeof etcd3;
  } catch (error) {
    throw new InvalidLockOptionsError(field, `needs the etcd3 package (npm install etcd3): ${(error as Error).message}`, MODULE_OPTIONS);
  }
  // etcd3 retries a broken watch stream after an exponential backoff of up to 30 s, on a ref'd
  // timer nobody can clear: pending at close(), it kept the process alive that long. Ours grows
  // to 1 s (a re-watch a second against a cluster that is down costs nothing).
  const faultHandling = (o.options?.faultHandling ?? {}) as Record<string, unknown>;
  return new etcd3.Etcd3({ ...o.options, hosts: o.hosts, faultHandling: { ...faultHandling, watchBackoff: faultHandling.watchBackoff ?? watchBackoff() } });
}

/** What etcd3's watch manager asks of a backoff: the next delay, and the one after. */
export interface WatchBackoff {
  readonly duration: number;
  next(): WatchBackoff;
}

/** 100 ms doubling to `maxMs`, with ±20 % jitter so processes do not reconnect in step. */
export function watchBackoff(maxMs = 1_000, base = 50): WatchBackoff {
  const duration = Math.round(base * (0.8 + Math.random() * 0.4));
  return { duration, next: () => watchBackoff(maxMs, Math.min(maxMs, base * 2)) };
}

/** Close a client this module opened, so that nothing of it keeps the process alive. */
export function closeEtcdClient(client: EtcdClientLike): void {
  // etcd3's watch manager retries a broken watch stream on a ref'd timer with growing backoff,
  // and keeps doing so after close() (each retry fails on the closed pool and schedules the
  // next): a closed application's process would never exit. End that chain at its next tick.
  const watchManager = (client as unknown as { watchManager?: { establishStream?: () => void; stream?: { cancel?: () => void } } }).watchManager;
  if (watchManager && typeof watchManager.establishStream === 'function') watchManager.establishStream = () => undefined;
  // And end the watch stream itself: closing the client leaves calls in flight running, and a
  // watch is a call without a deadline — one watcher whose cancel never completed (it waits
  // for an answer of the server, or for a reconnect) kept the process alive for good.
  try {
    watchManager?.stream?.cancel?.();
  } catch {
    // already ended
  }
  client.close();
}
