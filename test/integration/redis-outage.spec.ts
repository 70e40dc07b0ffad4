import { Redis } from 'ioredis';
import { LockBackendUnavailableError } from '../../lib/index.js';
import { startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';
import { backendsOf } from '../harness/backends-of.js';

/** Commands the app's Redis client has written and awaits an answer to (ioredis's commandQueue: test-only read). */
const unanswered = (app: LockApp): number =>
  (backendsOf(app.app).get('redis') as unknown as { client: { commandQueue: { length: number } } }).client.commandQueue.length;

/**
 * `send` goes out to a paused server, which is then SIGKILLed before it answers (the harness's kill9
 * would let it run first, and answer): the client keeps the unanswered write to resend on reconnect.
 * Resolves with what `send` settled to.
 */
async function killUnderUnansweredWrite(server: RedisServer, app: LockApp, send: () => Promise<unknown>): Promise<unknown> {
  server.pause();
  const attempt = send().catch((e: unknown) => e);
  await until(() => unanswered(app) >= 1, 10_000, 'the write sent, unanswered');
  const child = (server as unknown as { child: { exitCode: number | null; signalCode: string | null } }).child;
  process.kill(server.pid!, 'SIGKILL');
  while (child.exitCode === null && child.signalCode === null) await new Promise((r) => setTimeout(r, 10));
  return attempt;
}

/**
 * What ioredis does with a command written before its connection broke (it sends it again after
 * reconnecting), read through its commandQueue: run on the module's own ioredis client only.
 * node-redis fails such a command instead (never resends it); a run with TEST_REDIS_CLIENT set
 * leaves these out rather than test another client's internals.
 */
const ioredisIt = !process.env.TEST_REDIS_CLIENT || process.env.TEST_REDIS_CLIENT === 'ioredis' ? it : it.skip;

describe('Redis backend: server outages', () => {
  let server: RedisServer;
  let app: LockApp;

  beforeAll(async () => {
    server = await RedisServer.start();
    app = await startLockApp({ redis: { url: server.url, connectTimeoutMs: 500, commandTimeoutMs: 500 } });
  });

  afterAll(async () => {
    await app.close();
    await server.stop();
  });

  it('fails fast with LockBackendUnavailableError while Redis is down, and works again once it is back', async () => {
    const key = uniqueKey('outage');
    const before = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000 });
    await before.release();

    await server.kill9();
    const started = performance.now();
    let ran = false;
    const error = await app.locks
      .using(key, { purpose: 'efficiency', wait: 0 }, () => {
        ran = true;
      })
      .catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    expect(error).toBeInstanceOf(LockBackendUnavailableError);
    expect((error as Error).message).toMatch(/redis.*unavailable/i);
    expect(ran).toBe(false);
    // connectTimeoutMs + commandTimeoutMs is the bound; a hang would hit the 30 s test timeout.
    expect(elapsed).toBeLessThan(1_000 + 500);

    await server.restart();
    const deadline = Date.now() + 10_000;
    let lease;
    while (!lease && Date.now() < deadline) {
      lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000, wait: 0 }).catch(() => undefined);
    }
    expect(lease).toBeDefined();
    await lease!.release();
  });

  it('bounds a command to an unresponsive (paused) Redis by commandTimeoutMs', async () => {
    const key = uniqueKey('paused');
    await app.locks.tryAcquire(key, { purpose: 'efficiency' }).then((l) => l?.release());
    server.pause();
    try {
      const started = performance.now();
      const error = await app.locks.tryAcquire(key, { purpose: 'efficiency', ttl: 60_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockBackendUnavailableError);
      expect(performance.now() - started).toBeLessThan(1_500);
    } finally {
      server.resume();
    }
    // The SET that timed out is still applied once Redis resumes; the cleanup queued behind it
    // removes it, so no ghost lock blocks the key for its 60 s ttl.
    const raw = new Redis(server.url);
    try {
      const deadline = Date.now() + 5_000;
      while ((await raw.exists(`lock:{${key}}`)) === 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await raw.exists(`lock:{${key}}`)).toBe(0);
    } finally {
      raw.disconnect();
    }
  });

  ioredisIt('leaves no ghost lock when the connection dies under an unanswered SET and comes back later than connectTimeoutMs (ioredis resends the SET)', async () => {
    const key = uniqueKey('resent');
    await app.locks.tryAcquire(key, { purpose: 'efficiency' }).then((l) => l?.release());
    // The SET goes out to a paused server; the server dies before answering; the reconnect comes
    // only after the cleanup's own wait for a connection (500 ms) has run out.
    const attempt = killUnderUnansweredWrite(server, app, () => app.locks.tryAcquire(key, { purpose: 'efficiency', ttl: 30_000 }));
    expect(await attempt).toBeInstanceOf(LockBackendUnavailableError);
    await new Promise((r) => setTimeout(r, 1_500));
    await server.restart();
    const raw = new Redis(server.url);
    try {
      // Once the client is back it resends the unanswered SET to the new (empty) server: the key
      // must be deleted again, not left to block everyone for its 30 s ttl.
      // (The client reconnects with ioredis's back-off: under load, later than connectTimeoutMs.)
      let lease: unknown;
      for (const until = Date.now() + 10_000; ; ) {
        lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 1_000, wait: 5_000 }).catch((e: unknown) => e);
        if (!(lease instanceof LockBackendUnavailableError) || Date.now() > until) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(lease instanceof Error ? lease.message : 'ok').toBe('ok');
      await (lease as { release(): Promise<void> }).release();
      expect(await raw.exists(`lock:{${key}}`)).toBe(0);
    } finally {
      raw.disconnect();
    }
  }, 30_000);

  ioredisIt('leaves no ghost lock either when Redis comes back only after the ttl: the resent SET would hold the key for a whole ttl again', async () => {
    const key = uniqueKey('resent-late');
    const ttl = 3_000;
    await app.locks.tryAcquire(key, { purpose: 'efficiency' }).then((l) => l?.release());
    expect(await killUnderUnansweredWrite(server, app, () => app.locks.tryAcquire(key, { purpose: 'efficiency', ttl }))).toBeInstanceOf(LockBackendUnavailableError);
    // The fault: Redis stays down for longer than the ttl (the clean-up's own bound).
    await new Promise((r) => setTimeout(r, ttl + 1_000));
    await server.restart();
    const client = (backendsOf(app.app).get('redis') as unknown as { client: { status: string } }).client;
    await until(() => client.status === 'ready', 15_000, 'the app reconnected');
    // ioredis resent the unanswered SET as it reconnected (a fresh 3 s ttl on the new server); the
    // clean-up's delete follows it (a round trip or two: the restarted server has no scripts yet).
    const raw = new Redis(server.url);
    try {
      await until(async () => (await raw.exists(`lock:{${key}}`)) === 0, 1_000, 'the key free within 1 s of the reconnection, not after the resent ttl');
    } finally {
      raw.disconnect();
    }
    const lease = await app.locks.tryAcquire(key, { purpose: 'efficiency', ttl: 1_000 });
    expect(lease).not.toBeNull();
    await lease!.release();
  }, 30_000);

  ioredisIt('the same for a multi-key acquire: the resent all-or-nothing script leaves no key behind', async () => {
    const keys = [uniqueKey('resent-multi-a'), uniqueKey('resent-multi-b')];
    await app.locks.tryAcquire(keys, { purpose: 'efficiency' }).then((l) => l?.release());
    expect(await killUnderUnansweredWrite(server, app, () => app.locks.tryAcquire(keys, { purpose: 'efficiency', ttl: 30_000 }))).toBeInstanceOf(LockBackendUnavailableError);
    // Down for longer than the clean-up's wait for a connection (500 ms), shorter than the ttl.
    await new Promise((r) => setTimeout(r, 1_500));
    await server.restart();
    const client = (backendsOf(app.app).get('redis') as unknown as { client: { status: string } }).client;
    await until(() => client.status === 'ready', 15_000, 'the app reconnected');
    const raw = new Redis(server.url);
    try {
      await until(async () => (await raw.exists(...keys.map((k) => `lock:{${k}}`))) === 0, 2_000, 'both keys free within 2 s of the reconnection, not after the resent 30 s ttl');
    } finally {
      raw.disconnect();
    }
  }, 30_000);

  ioredisIt('closing the app while an acquire is unanswered gives the key back when the answer comes, before the client closes (review finding F2)', async () => {
    const closing = await startLockApp({ redis: { url: server.url, connectTimeoutMs: 500, commandTimeoutMs: 500 } });
    const key = uniqueKey('close-in-flight');
    await closing.locks.tryAcquire(key, { purpose: 'efficiency' }).then((l) => l?.release());
    server.pause();
    const attempt = closing.locks.acquire(key, { purpose: 'efficiency', ttl: 20_000 }).catch((e: unknown) => e);
    // The acquire is sent (unanswered: the server is paused) before the app closes.
    await until(() => unanswered(closing) >= 1, 10_000, 'the acquire sent');
    const closed = closing.close();
    await new Promise((r) => setTimeout(r, 150));
    server.resume();
    await closed;
    expect(await attempt).toBeInstanceOf(LockBackendUnavailableError); // shutting down: no lease
    const raw = new Redis(server.url);
    try {
      // The SET landed when Redis resumed: it must not stay for its 20 s ttl.
      expect(await raw.exists(`lock:{${key}}`)).toBe(0);
    } finally {
      raw.disconnect();
    }
  }, 30_000);
});
