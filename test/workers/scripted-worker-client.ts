import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { DistributedLockModuleOptions } from '../../lib/index.js';
import type { Adv2Command, Adv2Event } from './scripted-worker.js';

const compiled = path.resolve('.tmp/compiled/test/workers/scripted-worker.js');

/** A worker process (see scripted-worker.ts). Killed by its own PID only. */
export class Adv2Worker {
  readonly events: Adv2Event[] = [];
  private readonly listeners = new Set<() => void>();

  private constructor(readonly child: ChildProcess) {
    child.on('message', (message: Adv2Event) => {
      this.events.push(message);
      for (const listener of [...this.listeners]) listener();
    });
  }

  static async start(options: DistributedLockModuleOptions): Promise<Adv2Worker> {
    const child = fork(compiled, [], { env: { ...process.env, WORKER_OPTIONS: JSON.stringify(options) }, stdio: 'inherit' });
    const worker = new Adv2Worker(child);
    await worker.next((e) => e.event === 'ready', 20_000);
    return worker;
  }

  send(command: Adv2Command): void {
    this.child.send(command);
  }

  /** The first event matching, not consumed yet (removed once returned). */
  next(match: (e: Adv2Event) => boolean, timeoutMs = 10_000): Promise<Adv2Event> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const index = this.events.findIndex(match);
        if (index < 0) return false;
        const [found] = this.events.splice(index, 1);
        this.listeners.delete(check);
        clearTimeout(timer);
        resolve(found);
        return true;
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`worker: no matching event within ${timeoutMs} ms (have ${JSON.stringify(this.events)})`));
      }, timeoutMs);
      if (!check()) this.listeners.add(check);
    });
  }

  async status(id: string): Promise<Extract<Adv2Event, { event: 'status' }>> {
    this.send({ op: 'status', id });
    return (await this.next((e) => e.event === 'status' && e.id === id)) as Extract<Adv2Event, { event: 'status' }>;
  }

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
