import { verifyLockBackend } from '../../lib/testing/index.js';
import { SimpleRedisBackend } from '../../docs/samples/simple-redis.backend.js';
import { redisUrl } from '../harness/lock-app.js';
import { freePort } from '../harness/servers.mjs';

// The sample of docs/writing-a-backend.md, held to the conformance suite the way the page tells a
// user to run it: what it claims holds, and what it does not claim is skipped, by name.

describe('docs/samples/simple-redis.backend.ts: the "Writing a backend" sample', () => {
  it('passes every check of what it claims, and skips exactly the rest', async () => {
    const port = await freePort(); // reserved for this process and never listened on
    const report = await verifyLockBackend({
      create: () => new SimpleRedisBackend({ url: redisUrl() }),
      unreachable: () => new SimpleRedisBackend({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 500 }),
    });
    expect(report.failed).toEqual([]);
    // No queue (fairQueue false), no tokens, no semaphores, no acquireAll, no forceRelease, and
    // nothing kept per owner in memory (no bookkeeping()).
    expect(report.skipped.sort()).toEqual(
      ['acquire-all-all-or-nothing', 'bookkeeping-drains', 'force-release', 'semaphore-admits-at-most-permits', 'semaphore-permits-agree', 'tokens-increase', 'waiters-served-in-order'].sort(),
    );
    expect(report.passed).toContain('unreachable-bounded');
  }, 180_000);
});
