import { spawn } from 'node:child_process';
import path from 'node:path';
import { backendsOf } from '../harness/backends-of.js';
import { Redis } from 'ioredis';
import { redisUrl, sleep, startLockApp, uniqueKey, until, untilQueued } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';

const worker = path.resolve('.tmp/compiled/test/workers/resubscribe-close-worker.js');

// Found by the simulation (seed 2 of a full run: a worker process died of an unhandled "Connection
// is closed"): closing the app while the wake-up subscriber's re-subscription after a reconnect is
// still unanswered must not crash the process. See test/workers/resubscribe-close-worker.ts.
describe('Redis wake-up subscriber: close() during its re-subscription', () => {
  it('closes cleanly when the re-SUBSCRIBE after a reconnect is never answered', async () => {
    const child = spawn(process.execPath, [worker], {
      env: { ...process.env, WORKER_REDIS_URL: redisUrl(), WORKER_KEY: uniqueKey('resubscribe-close') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(null);
      }, 20_000);
      child.on('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(output).not.toContain('Connection is closed');
    expect(output).toContain('closed');
    expect(code).toBe(0);
  }, 30_000);
});

describe('Redis wake-up subscriber: re-subscribed after a reconnect', () => {
  it('a waiter is still woken by the hand-off (not the 500 ms re-check) once the subscriber has reconnected', async () => {
    const proxy = await TcpProxy.start(Number(new URL(redisUrl()).port));
    const app = await startLockApp({ redis: { url: `redis://${proxy.endpoint}` } });
    const raw = new Redis(redisUrl());
    try {
      const key = uniqueKey('resubscribed');
      const first = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      await app.locks.acquire(key, { purpose: 'efficiency', wait: 100 }).catch(() => undefined); // opens the subscriber
      await first.release();
      const backend = backendsOf(app.app).get('redis') as unknown as { channel: string; wake: { subscriber: { once(e: 'ready', f: () => void): void } } };
      const subscriber = backend.wake.subscriber;
      const reconnected = new Promise<void>((resolve) => subscriber.once('ready', resolve));
      proxy.cut();
      await reconnected;
      // Its SUBSCRIBE answered: the server counts a subscriber of the wake channel again (the cut one is gone).
      await until(async () => Number(((await raw.call('PUBSUB', 'NUMSUB', backend.channel)) as [string, number])[1]) >= 1, 10_000, 'the wake channel subscribed again');
      const holder = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      const waiting = app.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000, wait: 5_000 });
      await untilQueued(app.locks, key, { purpose: 'efficiency' }, 1);
      await sleep(700); // past a re-check while queued
      const released = performance.now();
      await holder.release();
      const next = await waiting;
      expect(performance.now() - released).toBeLessThan(250);
      await next.release();
    } finally {
      raw.disconnect();
      await app.close();
      await proxy.close();
    }
  });
});
