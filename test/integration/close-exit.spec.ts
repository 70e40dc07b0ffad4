import { spawn } from 'node:child_process';
import path from 'node:path';
import { etcdHosts } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

const worker = path.resolve('.tmp/compiled/test/workers/close-exit-worker.js');

/** Each run its own key: a previous run's lock may still sit on a session that expires later. */
let runs = 0;

async function closeWhile(onReady: (proxy: TcpProxy) => void, env: NodeJS.ProcessEnv = {}): Promise<{ exited: boolean; output: string; afterReadyMs: number }> {
  const proxy = await TcpProxy.start(Number(etcdHosts()[0].split(':').pop()));
  try {
    const child = spawn(process.execPath, [worker], { env: { ...process.env, WORKER_KEY: `close-exit-${++runs}`, ...env, WORKER_ETCD_HOSTS: proxy.endpoint }, stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    let readyAt = 0;
    child.stdout.on('data', (chunk) => {
      output += chunk;
      if (!readyAt && output.includes('ready')) {
        readyAt = performance.now();
        onReady(proxy);
      }
    });
    const exited = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(false);
      }, 25_000);
      child.on('exit', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    return { exited, output, afterReadyMs: performance.now() - readyAt };
  } finally {
    proxy.heal();
    await proxy.close();
  }
}

describe('close() with etcd unreachable: nothing the module opened keeps the process alive', () => {
  it('a process whose etcd went silent exits by itself after close() (requests end with their gRPC deadlines: commandTimeoutMs + 2.5 s at most)', async () => {
    // etcd goes silent: the release and the revoke at close() get no answer.
    const r = await closeWhile((proxy) => proxy.blackhole());
    expect(r.output).toContain('closed in');
    expect(r.exited).toBe(true);
    // ready → close after 1 s → every pending request ends by its deadline (0.5 s + 2.5 s slack).
    expect(r.afterReadyMs).toBeLessThan(10_000);
  }, 30_000);

  it('a process closed while its gRPC channel reconnects into silence exits by itself (etcd member died, its address now answers nothing)', async () => {
    // The connection is reset (a member killed), and the address it comes back to takes the TCP
    // connection but never answers the HTTP/2 handshake: the channel sits in CONNECTING at close().
    const r = await closeWhile((proxy) => {
      proxy.blackhole();
      proxy.cut();
    });
    if (process.env.WORKER_DEBUG) console.log(r.output);
    expect(r.output).toContain('closed in');
    expect(r.exited).toBe(true);
    expect(r.afterReadyMs).toBeLessThan(10_000);
  }, 30_000);

  it('a process whose own etcd client still has a watch open exits by itself after close() (the watch stream is ended)', async () => {
    const r = await closeWhile(() => undefined, { WORKER_LEFTOVER_WATCH: '1' });
    expect(r.output).toContain('watching');
    expect(r.output).toContain('closed in');
    expect(r.exited).toBe(true);
    expect(r.afterReadyMs).toBeLessThan(10_000);
  }, 30_000);

  it('a process that timed out on a write of unknown outcome exits by itself after close() (the clean-up deletes carry deadlines too)', async () => {
    const r = await closeWhile((proxy) => proxy.blackhole(), { WORKER_UNKNOWN_WRITE: '1' });
    if (process.env.WORKER_DEBUG) console.log(r.output);
    expect(r.output).toContain('unknown write: LockBackendUnavailableError');
    expect(r.output).toContain('closed in');
    expect(r.exited).toBe(true);
    expect(r.afterReadyMs).toBeLessThan(12_000);
  }, 30_000);
});
