import { Redis } from 'ioredis';
import { redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review of list() on Redis: an application that namespaces its Redis with ioredis'
// own `keyPrefix` option (in `redis.options`, or on the `redis.client` it passes) gets working
// locks — ioredis prefixes every key it sends (SET, EVALSHA's KEYS) — but SCAN's MATCH pattern is
// not prefixed by ioredis and SCAN returns the full stored names, so listKeys() matches nothing
// (or names that userKeyOf() then rejects): list() and the lock board say "no lock held" while
// inspect() finds the key held.

describe('list() with an ioredis keyPrefix (namespaced Redis)', () => {
  const apps: LockApp[] = [];
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
    for (const client of clients) client.disconnect();
  });
  const own = (client: Redis): Redis => (clients.push(client), client);

  it.each([
    ['redis.options.keyPrefix', () => ({ redis: { url: redisUrl(), options: { keyPrefix: 'tenant-a:' } } })],
    ['a redis.client with keyPrefix', () => ({ redis: { client: own(new Redis(redisUrl(), { keyPrefix: 'tenant-b:' })) } })],
  ] as const)('%s: a held key is inspected as held, and list() must report it', async (_name, options) => {
    const app = await startLockApp(options());
    apps.push(app);
    const key = uniqueKey('review-ns');
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 20_000 });
    try {
      // The lock works and inspect() sees it...
      expect(await app.locks.inspect(key, { backend: 'redis' })).toMatchObject({ key, local: true });
      // ...so list() must as well.
      const listed = await app.locks.list({ backend: 'redis' }, { prefix: key });
      expect(listed.map((info) => info.key)).toEqual([key]);
    } finally {
      await lease.release();
    }
  });
});
