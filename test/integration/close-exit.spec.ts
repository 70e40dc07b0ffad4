import { spawn } from 'node:child_process';
import path from 'node:path';
import { etcdHosts } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

const worker = path.resolve('.tmp/compiled/test/workers/close-exit-worker.js');

describe('close() with etcd unreachable: nothing the module opened keeps the process alive', () => {
  it('a process whose etcd went silent exits by itself after close() (requests end with their gRPC deadlines: commandTimeoutMs + 2.5 s at most)', async () => {
    const proxy = await TcpProxy.start(Number(etcdHosts()[0].split(':').pop()));
    try {
      const child = spawn(process.execPath, [worker], { env: { ...process.env, WORKER_ETCD_HOSTS: proxy.endpoint }, stdio: ['ignore', 'pipe', 'inherit'] });
      let output = '';
      let readyAt = 0;
      child.stdout.on('data', (chunk) => {
        output += chunk;
        if (!readyAt && output.includes('ready')) {
          readyAt = performance.now();
          proxy.blackhole(); // etcd goes silent: the release and the revoke at close() get no answer
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
      expect(output).toContain('closed in');
      expect(exited).toBe(true);
      // ready → close after 1 s → every pending request ends by its deadline (0.5 s + 2.5 s slack).
      expect(performance.now() - readyAt).toBeLessThan(10_000);
    } finally {
      proxy.heal();
      await proxy.close();
    }
  }, 30_000);
});
