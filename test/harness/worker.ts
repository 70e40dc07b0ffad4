import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { DistributedLockModuleOptions } from '../../lib/index.js';
import type { WorkerCommand, WorkerEvent } from '../workers/lock-worker.js';

const compiled = path.resolve('.tmp/compiled/test/workers/lock-worker.js');

/** A lock worker process (compiled to .tmp/compiled by `npm test` before jest starts). Killed by PID only. */
export class LockWorker {
  private readonly events: WorkerEvent[] = [];
  private readonly listeners = new Set<() => void>();

  private constructor(readonly child: ChildProcess) {
    child.on('message', (message: WorkerEvent) => {
      this.events.push(message);
      for (const listener of this.listeners) listener();
    });
  }

  /**
   * `backends`: a Redis URL (efficiency) and/or etcd hosts and session ttl, a PostgreSQL URL, a
   * ZooKeeper connection string (correctness), Redlock's master URLs (efficiency) — or `options`,
   * the module options whole (a BackendCase's `server().options`; they must survive JSON, so no
   * client objects), which is how any backend reaches a worker without the worker naming it.
   */
  static async start(
    backends:
      | string
      | { options: DistributedLockModuleOptions }
      | { redisUrl?: string; redisClient?: 'node-redis'; redisHeartbeatMs?: number; etcdHosts?: string[]; sessionTtlSeconds?: number; postgresUrl?: string; mysqlUrl?: string; zookeeper?: string; zkSessionMs?: number; redlockUrls?: string[] },
  ): Promise<LockWorker> {
    if (typeof backends === 'object' && 'options' in backends) {
      return LockWorker.forked({ ...process.env, WORKER_OPTIONS: JSON.stringify(backends.options) });
    }
    const b = typeof backends === 'string' ? { redisUrl: backends } : backends;
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      WORKER_REDIS_URL: b.redisUrl ?? '',
      WORKER_ETCD_HOSTS: b.etcdHosts?.join(',') ?? '',
      WORKER_POSTGRES_URL: b.postgresUrl ?? '',
      WORKER_MYSQL_URL: b.mysqlUrl ?? '',
      WORKER_ZOOKEEPER: b.zookeeper ?? '',
      WORKER_REDLOCK: b.redlockUrls?.join(',') ?? '',
    };
    if (b.zkSessionMs !== undefined) env.WORKER_ZK_SESSION_MS = String(b.zkSessionMs);
    if (b.redisClient !== undefined) env.WORKER_REDIS_CLIENT = b.redisClient;
    if (b.redisHeartbeatMs !== undefined) env.WORKER_REDIS_HEARTBEAT_MS = String(b.redisHeartbeatMs);
    if (b.sessionTtlSeconds !== undefined) env.WORKER_SESSION_TTL = String(b.sessionTtlSeconds);
    return LockWorker.forked(env);
  }

  private static async forked(env: NodeJS.ProcessEnv): Promise<LockWorker> {
    const child = fork(compiled, [], { env, stdio: 'inherit' });
    const worker = new LockWorker(child);
    await worker.next('ready', 20_000);
    return worker;
  }

  send(command: WorkerCommand): void {
    this.child.send(command);
  }

  /** The first event named `name` not consumed yet. */
  next<E extends WorkerEvent['event']>(name: E, timeoutMs = 10_000): Promise<Extract<WorkerEvent, { event: E }>> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const index = this.events.findIndex((e) => e.event === name || e.event === 'error');
        if (index < 0) return false;
        const [found] = this.events.splice(index, 1);
        this.listeners.delete(check);
        clearTimeout(timer);
        if (found.event === 'error' && name !== 'error') reject(new Error(`worker: ${found.name}: ${found.message}`));
        else resolve(found as Extract<WorkerEvent, { event: E }>);
        return true;
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`worker sent no "${name}" within ${timeoutMs} ms`));
      }, timeoutMs);
      if (!check()) this.listeners.add(check);
    });
  }

  /** SIGSTOP: the whole process freezes, as in a long GC pause. */
  pause(): void {
    this.child.kill('SIGSTOP');
  }

  resume(): void {
    this.child.kill('SIGCONT');
  }

  kill9(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGCONT');
    this.child.kill('SIGKILL');
    return exited;
  }
}
