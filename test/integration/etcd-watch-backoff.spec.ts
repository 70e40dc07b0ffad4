import type { INestApplicationContext } from '@nestjs/common';
import { backendsOf } from '../harness/backends-of.js';
import { etcdHosts, startLockApp } from '../harness/lock-app.js';

interface Backoff {
  duration: number;
  next(): Backoff | undefined;
}

/** The watch manager's backoff of the etcd3 client the module created. */
function watchBackoffOf(app: INestApplicationContext): Backoff {
  const backend = backendsOf(app).get('etcd') as unknown as { client: { watchManager: { backoff: Backoff } } };
  return backend.client.watchManager.backoff;
}

// etcd3 retries a broken watch stream on a ref'd timer nobody can clear; with its default
// backoff (up to 30 s) a timer pending at close() kept the process alive for that long
// (simulation seed 167 of the long run: a Timeout still alive 8 s after app.close()).
describe('etcd watch-stream retries: a pending retry never holds a closed process for long', () => {
  it('the client the module creates retries a broken watch stream after at most ~1 s, however often it broke', async () => {
    const app = await startLockApp({ etcd: { hosts: etcdHosts() } });
    try {
      let backoff: Backoff | undefined = watchBackoffOf(app.app);
      const durations: number[] = [];
      for (let i = 0; i < 30 && backoff; i++) {
        durations.push(backoff.duration);
        backoff = backoff.next();
      }
      expect(durations).toHaveLength(30);
      expect(Math.max(...durations)).toBeLessThanOrEqual(1_200);
      expect(durations[0]).toBeLessThan(200); // a first retry comes quickly
    } finally {
      await app.close();
    }
  });

  it('a watchBackoff the application passes in etcd.options.faultHandling is kept', async () => {
    const mine: Backoff = { duration: 7, next: () => mine };
    const app = await startLockApp({ etcd: { hosts: etcdHosts(), options: { faultHandling: { watchBackoff: mine } } } });
    try {
      expect(watchBackoffOf(app.app).duration).toBe(7);
    } finally {
      await app.close();
    }
  });
});
