import { inspect } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { InvalidLockOptionsError, RedisBackend, type Lease } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, until, untilQueued, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { LockWorker } from '../harness/worker.js';
import { LEASE_INTERNALS } from '../../lib/engine/lease.js';

/**
 * Regression tests for issue 12 (options validation and the Redis backend), on real servers:
 * a one-node Redis Cluster, dedicated redis-servers whose command counts are read from
 * `INFO commandstats`, and the run's etcd.
 */

async function startCluster(): Promise<RedisServer> {
  const server = await RedisServer.start({ cluster: true });
  const admin = new Redis(server.url);
  try {
    await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    for (let i = 0; i < 200 && !String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'); i++) {
      await sleep(25);
    }
  } finally {
    admin.disconnect();
  }
  return server;
}

/** Lua script calls (EVALSHA + EVAL) the server has run since the last CONFIG RESETSTAT. */
async function scriptCalls(raw: Redis): Promise<number> {
  const stats = String(await raw.info('commandstats'));
  let calls = 0;
  for (const m of stats.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)) calls += Number(m[2]);
  return calls;
}

describe('issue 12 #4: Redis Cluster keys whose braces would break the hash tag', () => {
  let server: RedisServer;
  let cluster: Cluster;
  let a: LockApp;
  let b: LockApp;

  beforeAll(async () => {
    server = await startCluster();
    cluster = new Cluster([{ host: '127.0.0.1', port: server.port }]);
    a = await startLockApp({ redis: { client: cluster } });
    b = await startLockApp({ redis: { client: cluster } });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    cluster?.disconnect();
    await server?.stop();
  });

  it.each(['}a', '{', '{}', 'a}b{c', '}', '}}{{', '%7Da'])(
    'key %j: acquire, queue two waiters, hand over twice and release, all on one slot',
    async (suffix) => {
      // The odd characters lead the key (that is what breaks the tag); a unique tail keeps runs apart.
      const key = `${suffix}${uniqueKey('')}`;
      const holder = await a.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      expect(await b.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      const first = b.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000, wait: 5_000 });
      // Each waiter in line before the next asks (b's is its process's first wait: issue 33).
      await untilQueued(a.locks, key, { purpose: 'efficiency' }, 1);
      const second = a.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000, wait: 5_000 });
      await untilQueued(a.locks, key, { purpose: 'efficiency' }, 2);
      await holder.release();
      const one = await first;
      expect(await a.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
      await one.release();
      const two = await second;
      await two.release();
      // Nothing left behind, in whatever layout the backend chose for the key.
      const keys = new RedisBackend({ client: cluster, ownsClient: false }).keysOf(key);
      const slots = await Promise.all(keys.map((k) => cluster.call('CLUSTER', 'KEYSLOT', k)));
      expect(new Set(slots).size).toBe(1);
      for (const k of keys) expect(await cluster.exists(k)).toBe(0);
    },
  );

  it('keeps distinct keys distinct (the escaped layout never meets a plain one)', async () => {
    const tail = uniqueKey('');
    // `}x` is escaped; `%7Dx` and `%{%7Dx}`-looking keys must still be other locks.
    const keys = [`}x${tail}`, `%7Dx${tail}`, `%25${tail}`, `%${tail}`];
    const leases: Lease[] = [];
    for (const key of keys) leases.push(await a.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000, wait: 0 }));
    for (const lease of leases) await lease.release();
  });

  it('leaves the layout of plain keys as it was: lock:{key}', () => {
    const backend = new RedisBackend({ client: cluster, ownsClient: false });
    expect(backend.keysOf('invoice:42')).toEqual(['lock:{invoice:42}', 'lock:{invoice:42}:q2', 'lock:{invoice:42}:q2a']);
    expect(backend.keysOf('a}b{c')).toEqual(['lock:{a}b{c}', 'lock:{a}b{c}:q2', 'lock:{a}b{c}:q2a']);
  });
});

describe('issue 12 #6: correctness is never routed to the in-process memory backend by default', () => {
  it('two replicas configured { redis, memory: true } cannot both "hold" a correctness lock', async () => {
    const a = await startLockApp({ redis: { url: redisUrl() }, memory: true });
    const b = await startLockApp({ redis: { url: redisUrl() }, memory: true });
    try {
      const key = uniqueKey('correctness-memory');
      const results = await Promise.allSettled([
        a.locks.acquire(key, { purpose: 'correctness', wait: 0 }),
        b.locks.acquire(key, { purpose: 'correctness', wait: 0 }),
      ]);
      for (const r of results) {
        if (r.status === 'fulfilled') await r.value.release();
      }
      // Before the fix both were fulfilled with token 1n: two holders of one "correctness" lock.
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
      for (const r of results) {
        const error = (r as PromiseRejectedResult).reason;
        expect(error).toBeInstanceOf(InvalidLockOptionsError);
        expect(error.message).toMatch(/purposes\.correctness/);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('still serves correctness from memory when purposes.correctness says so explicitly', async () => {
    const a = await startLockApp({ memory: true, purposes: { correctness: 'memory' } });
    try {
      const lease = await a.locks.acquire(uniqueKey('explicit-memory'), { purpose: 'correctness', wait: 0 });
      expect(lease.token).toBe(1n);
      await lease.release();
    } finally {
      await a.close();
    }
  });
});

describe('issue 12 #9: credentials never appear in errors; the URL scheme is case-insensitive', () => {
  it.each([
    'redis://user:s3cret-pw@127.0.0.1:99999',
    'http://user:s3cret-pw@127.0.0.1:6379',
    'redis//:s3cret-pw@127.0.0.1:6379',
    'redis://127.0.0.1:99999?password=s3cret-pw',
    'redis://:s3cret-pw@[::1',
  ])('bootstrap with url %s fails naming redis.url, without the password', async (url) => {
    const error = await startLockApp({ redis: { url } }).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('redis.url');
    expect(inspect(error, { depth: 5 })).not.toContain('s3cret');
  });

  it('accepts REDIS:// (upper-case scheme) and locks through it', async () => {
    const upper = redisUrl().replace(/^redis:/, 'REDIS:');
    const app = await startLockApp({ redis: { url: upper } });
    try {
      const lease = await app.locks.acquire(uniqueKey('upper-scheme'), { purpose: 'efficiency', wait: 0 });
      await lease.release();
    } finally {
      await app.close();
    }
  });
});

describe('issue 12 #10: a ttl at or below the drift allowance is refused before any backend call', () => {
  let server: RedisServer;
  let raw: Redis;
  let app: LockApp;

  beforeAll(async () => {
    server = await RedisServer.start();
    raw = new Redis(server.url);
    app = await startLockApp({ redis: { url: server.url } });
  });
  afterAll(async () => {
    await app?.close();
    raw?.disconnect();
    await server?.stop();
  });

  it('acquire({ ttl: 2, wait: 300 }) fails with InvalidLockOptionsError naming ttl, and sends nothing', async () => {
    const key = uniqueKey('tiny-ttl');
    // Someone holds the key, so a waiter queues; every grant of 2 ms is "already expired".
    const holder = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000 });
    await raw.config('RESETSTAT');
    const error = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 2, wait: 300 }).then(
      (lease) => lease.release(),
      (e: unknown) => e,
    );
    const info = String(await raw.info('commandstats'));
    const sent = [...info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)]
      .filter((m) => !['info', 'config'].includes(m[1]))
      .reduce((n, m) => n + Number(m[2]), 0);
    expect({ sent, error: (error as Error)?.constructor?.name, field: (error as InvalidLockOptionsError)?.field }).toEqual({
      sent: 0,
      error: 'InvalidLockOptionsError',
      field: 'ttl',
    });
    await holder.release();
  });

  it('refuses defaults.ttl at or below the allowance at bootstrap', async () => {
    const error = await startLockApp({ redis: { url: server.url }, defaults: { ttl: 2 } }).then(
      async (a) => {
        await a.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('defaults.ttl');
  });
});

describe('issue 12 #11: lone UTF-16 surrogates in keys are refused before any backend sees them', () => {
  it('Redis: k\\uD800 and k\\uDC00 are refused (they used to collide as U+FFFD)', async () => {
    const app = await startLockApp({ redis: { url: redisUrl() } });
    const tail = uniqueKey('');
    const held: Lease[] = [];
    const outcome = async (key: string): Promise<string> => {
      try {
        const lease = await app.locks.tryAcquire(key, { purpose: 'efficiency' });
        if (lease) held.push(lease);
        return lease ? 'acquired' : 'busy';
      } catch (error) {
        return `${(error as Error).constructor.name} ${(error as InvalidLockOptionsError).field}`;
      }
    };
    try {
      // Before the fix: { high: 'acquired', low: 'busy' } — two different keys, one lock.
      expect({ high: await outcome(`k\uD800${tail}`), low: await outcome(`k\uDC00${tail}`) }).toEqual({
        high: 'InvalidLockOptionsError key',
        low: 'InvalidLockOptionsError key',
      });
      // A well-formed astral character (a surrogate pair) is fine.
      const lease = await app.locks.acquire(`k\uD83D\uDD12${tail}`, { purpose: 'efficiency', wait: 0 });
      await lease.release();
    } finally {
      for (const lease of held) await lease.release();
      await app.close();
    }
  });

  it('etcd: k\\uD800 is refused with InvalidLockOptionsError, not a raw URIError', async () => {
    const app = await startLockApp({ etcd: { hosts: etcdHosts() } });
    try {
      const error = await app.locks.acquire(`k\uD800${uniqueKey('')}`, { purpose: 'correctness', wait: 0 }).then(
        (lease) => lease.release(),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as InvalidLockOptionsError).field).toBe('key');
    } finally {
      await app.close();
    }
  });

  it.each([
    [{ redis: { url: 'redis://127.0.0.1:6379', keyPrefix: 'lock\uD800:' } }, 'redis.keyPrefix'],
    [{ etcd: { hosts: '127.0.0.1:2379', prefix: 'lock\uDC00/' } }, 'etcd.prefix'],
  ])('refuses a prefix with a lone surrogate at bootstrap (%#)', async (options, field) => {
    const error = await startLockApp(options).then(
      async (a) => {
        await a.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe(field);
  });
});

describe('issue 12 #12: lockDelay does not change the Redis hand-off command count', () => {
  const backends: RedisBackend[] = [];
  let server: RedisServer;
  let raw: Redis;
  let a: LockApp;
  let b: LockApp;

  beforeAll(async () => {
    server = await RedisServer.start();
    raw = new Redis(server.url);
    // Waiters re-check every 5 s, not every 0.5 s: a waiter's heartbeat script is not a hand-off's
    // (a full run on a loaded machine counted 11 scripts instead of 10 when D waited past 0.5 s).
    const app = (): Promise<LockApp> => {
      const backend = new RedisBackend({ client: new Redis(server.url), ownsClient: true, waiterHeartbeatMs: 5_000 });
      backends.push(backend); // an application's own backend outlives it: closed in afterAll
      return startLockApp({ backends: { redis: backend } });
    };
    a = await app();
    b = await app();
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    for (const backend of backends) await backend.close();
    raw?.disconnect();
    await server?.stop();
  });

  /** A holds; three waiters queue; each holder keeps the key `holdMs`, so three hand-offs. Returns script calls. */
  async function threeHandOffs(lockDelay: number): Promise<{ scripts: number; order: string[] }> {
    const key = uniqueKey(`hand-offs-${lockDelay}`);
    const opts = { purpose: 'efficiency' as const, ttl: 400, lockDelay, wait: 5_000 };
    const holdMs = 150;
    const order: string[] = [];
    const hold = async (name: string, lease: Promise<Lease>): Promise<void> => {
      const l = await lease;
      order.push(name);
      await sleep(holdMs);
      await l.release();
    };
    await raw.config('RESETSTAT');
    const first = a.locks.acquire(key, opts);
    await first;
    const waiters: Promise<void>[] = [];
    for (const [i, name] of ['B', 'C', 'D'].entries()) {
      waiters.push(hold(name, b.locks.acquire(key, opts)));
      // In line before the next asks — read with LLEN, not inspect() (a script: the count below is of scripts).
      await until(async () => (await raw.llen(`lock:{${key}}:q2`)) >= i + 1, 10_000, `${name} queued`);
    }
    await hold('A', first);
    await Promise.all(waiters);
    return { scripts: await scriptCalls(raw), order: ['A', ...order.filter((n) => n !== 'A')] };
  }

  // Before the engine passed `validityMs` (the ttl it trusts, without lockDelay): 10 scripts
  // without lockDelay, 12 with — every hand-off was judged with ttl + lockDelay and re-queued.
  it('three hand-offs cost as many scripts with lockDelay: 1000 as without', async () => {
    // Warm up: load the scripts (a NOSCRIPT EVAL fallback would count twice) and open the subscribers.
    await threeHandOffs(0);
    // The fewest of three runs each: a loaded machine adds a script now and then (a waiter joining
    // after the release it waited for, one way or the other: 10 vs 11 both ways in full runs); the
    // defect added them to every run with lockDelay.
    const fewest = async (lockDelay: number): Promise<{ scripts: number; orders: string[][] }> => {
      const runs = [await threeHandOffs(lockDelay), await threeHandOffs(lockDelay), await threeHandOffs(lockDelay)];
      return { scripts: Math.min(...runs.map((r) => r.scripts)), orders: runs.map((r) => r.order) };
    };
    const without = await fewest(0);
    const withDelay = await fewest(1_000);
    for (const order of [...without.orders, ...withDelay.orders]) expect(order).toEqual(['A', 'B', 'C', 'D']);
    expect(withDelay.scripts).toBe(without.scripts);
  });
});

describe('issue 12 (suspected): a waiter never trusts a hand-off reservation longer than the server keeps it', () => {
  let raw: Redis;
  let clientA: Redis;
  let clientB: Redis;

  beforeAll(() => {
    raw = new Redis(redisUrl());
    clientA = new Redis(redisUrl());
    clientB = new Redis(redisUrl());
  });
  afterAll(() => {
    raw.disconnect();
    clientA.disconnect();
    clientB.disconnect();
  });

  it('releaser with waiterHeartbeatMs 100 (reservation 300 ms), waiter with 1000: the waiter trusts ≤ 300 ms', async () => {
    // Two processes of one deployment with different settings (or library versions): the
    // releaser sets the reservation's PX, the waiter decides how long to trust it.
    const releaser = new RedisBackend({ client: clientA, ownsClient: false, waiterHeartbeatMs: 100 });
    const waiter = new RedisBackend({ client: clientB, ownsClient: false, waiterHeartbeatMs: 1_000 });
    const key = uniqueKey('reservation-length');
    try {
      expect(await releaser.acquire({ key, owner: 'holder', ttlMs: 10_000, queue: false })).toEqual({ acquired: true });
      expect((await waiter.acquire({ key, owner: 'waiter', ttlMs: 10_000, queue: true })).acquired).toBe(false);
      const woken = waiter.waitForTurn(key, 'waiter', 5_000);
      await releaser.release(key, 'holder');
      const releasedAt = performance.now(); // the reservation ended no later than this + its PX
      const serverPx = Number(await raw.pttl(releaser.keysOf(key)[0]));
      expect(serverPx).toBeGreaterThan(0);
      expect(serverPx).toBeLessThanOrEqual(300);
      await woken;
      const granted = await waiter.acquire({ key, owner: 'waiter', ttlMs: 10_000, queue: true });
      expect(granted.acquired).toBe(true);
      // Woken at once: the message path (a provisional start on the reservation), not a claim.
      expect(granted.acquired && granted.provisional).toBeTruthy();
      if (granted.acquired && granted.provisional) {
        const trustedUntil = granted.provisional.validFrom + granted.provisional.validForMs;
        // Before the fix: validForMs = min(ttl, 3 × the waiter's own 1000 ms) = 3000 ms.
        expect(trustedUntil).toBeLessThanOrEqual(releasedAt + 300);
        // The waiter's own ttl, claimed at once (its 10 s are more than the 300 ms reservation).
        expect(await granted.provisional.confirmed).toBeGreaterThan(0);
        expect(Number(await raw.pttl(releaser.keysOf(key)[0]))).toBeGreaterThan(9_000);
      }
      await waiter.release(key, 'waiter');
    } finally {
      await releaser.close();
      await waiter.close();
    }
  });

  it('two processes, two holders: a waiter whose claim is slow keeps trusting a reservation the server dropped', async () => {
    // Process B's commands go through a proxy that delays them 600 ms each way (its wake-up
    // subscription does not). A (a process of its own, as in a deployment) releases with a 300 ms
    // reservation (waiterHeartbeatMs 100); B
    // (waiterHeartbeatMs 1000) trusted it for its own 3 s while its claim was on the way.
    const server = new URL(redisUrl());
    const proxy = await TcpProxy.start(Number(server.port));
    const direct = () => new Redis(redisUrl());
    const slowB = new Redis(`redis://${proxy.endpoint}`);
    (slowB as unknown as { duplicate: () => Redis }).duplicate = direct;
    const clients = [direct(), slowB];
    const [clientC] = clients;
    const backend = (client: Redis, waiterHeartbeatMs: number) => new RedisBackend({ client, ownsClient: false, waiterHeartbeatMs });
    const backends = [backend(slowB, 1_000), backend(clientC, 500)];
    const apps = await Promise.all(backends.map((r) => startLockApp({ backends: { r }, purposes: { efficiency: 'r' } })));
    const [b, c] = apps;
    const a = await LockWorker.start({ redisUrl: redisUrl(), redisHeartbeatMs: 100 });
    try {
      // Load the scripts (a NOSCRIPT fallback would cost B a second delayed round trip).
      const warm = uniqueKey('warm-up');
      const first = await c.locks.acquire(warm, { purpose: 'efficiency' });
      const next = b.locks.acquire(warm, { purpose: 'efficiency', wait: 2_000 });
      await untilQueued(c.locks, warm, { purpose: 'efficiency' }, 1);
      await first.release();
      await (await next).release();
      await slowB.ping();
      proxy.delay(600);

      const key = uniqueKey('two-holders');
      a.send({ op: 'acquire', key, ttl: 10_000, wait: 0 });
      await a.next('acquired');
      let bLease: Lease | undefined;
      const waiting = b.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000, wait: 8_000 }).then((l) => (bLease = l));
      waiting.catch(() => undefined); // it may still wait when the apps close
      // B's SET NX (0–1.2 s) failed; its queue request reaches Redis at ~1.8 s.
      await untilQueued(c.locks, key, { purpose: 'efficiency' }, 1);
      a.send({ op: 'release' }); // reserves the key for B for 300 ms and wakes it
      await a.next('released');
      await sleep(550); // the reservation is gone; B's claim reaches Redis only at ~+1 s
      const cLease = await c.locks.tryAcquire(key, { purpose: 'efficiency', ttl: 10_000 });
      const bHolds = bLease !== undefined && LEASE_INTERNALS.held(bLease) && !bLease.signal.aborted;
      // Before the fix: { c: true, b: true } — C holds the key and B, started on the
      // reservation, believes it holds too (for ~3 s from its queue request).
      expect({ c: cLease !== null, b: bHolds }).toEqual({ c: true, b: false });
      await cLease?.release();
      await waiting.catch(() => undefined);
      await bLease?.release().catch(() => undefined);
    } finally {
      proxy.heal();
      await a.kill9();
      await Promise.all(apps.map((app) => app.close()));
      await Promise.all(backends.map((r) => r.close()));
      for (const client of clients) client.disconnect();
      await proxy.close();
    }
  }, 20_000);
});
