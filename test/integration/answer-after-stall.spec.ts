import { Redis } from 'ioredis';
import { LockBackendUnavailableError } from '../../lib/index.js';
import { redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { RedisServer } from '../harness/servers.mjs';

// An answer that reached this process in time must count, even when the process itself could not
// read it in time. A Node process stalls now and then (a long garbage collection, a synchronous
// JSON.parse, a module compiled on first use): when it runs again, its timers come first and its
// sockets after, so a per-command timeout fired before the answer already waiting in the socket
// was read, and a lock every server had granted failed as "unavailable" — on Redlock, "0 of 3
// masters answered". The time of the stall still counts against the lease: what is answered late
// is valid for less.

/** Block this process's event loop for `ms`, as a long garbage collection does. */
function blockFor(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: no timer, no socket is served
  }
}

/**
 * After the next `count` commands written on these clients, block the event loop for `ms`: the
 * servers answer while the process is stalled, and the answers wait in its sockets.
 */
function stallAfterWrites(clients: Redis[], count: number, ms: number): void {
  let left = count;
  const originals = clients.map((client) => {
    const stream = client.stream as unknown as { write: (...args: unknown[]) => boolean };
    const write = stream.write;
    stream.write = function (this: unknown, ...args: unknown[]): boolean {
      const written = write.apply(this, args);
      left -= 1;
      if (left === 0) {
        clients.forEach((c, i) => ((c.stream as unknown as { write: unknown }).write = originals[i]));
        process.nextTick(() => blockFor(ms));
      }
      return written;
    };
    return write;
  });
}

// The timeout is also every other command's here (the warm-up, the release): 100 ms, with a
// 400 ms stall, failed a warm-up acquire once in ~300 on Node 24 with 3 workers and a CPU-bound
// process on 2 cores (2 of 3 masters past 100 ms; run c47-1 the same for a release), where the
// slowest of 150 measured was 22 ms. 1 s is the bound that is not under test; the stall is twice it.
const TIMEOUT_MS = 1_000;
const STALL_MS = 2_000;

describe('an answer that arrived while the process was stalled counts (no false "unavailable")', () => {
  const apps: LockApp[] = [];
  const clients: Redis[] = [];
  const masters: RedisServer[] = [];
  const client = async (url: string): Promise<Redis> => {
    const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    clients.push(c);
    await c.connect();
    return c;
  };

  beforeAll(async () => {
    masters.push(...(await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()])));
  }, 30_000);
  afterAll(async () => {
    for (const app of apps.splice(0)) await app.close();
    for (const c of clients.splice(0)) c.disconnect();
    for (const m of masters.splice(0)) if (m.running) await m.stop();
  }, 30_000);

  it(`Redis: a ${STALL_MS} ms stall right after the acquire is sent, commandTimeoutMs ${TIMEOUT_MS}: granted`, async () => {
    const c = await client(redisUrl());
    const app = await startLockApp({ redis: { client: c, commandTimeoutMs: TIMEOUT_MS } });
    apps.push(app);
    // Warm: the scripts are loaded, so the acquire below is one command.
    await (await app.locks.acquire(uniqueKey('stall-warm'), { purpose: 'efficiency', ttl: 5_000 })).release();

    const key = uniqueKey('stall-redis');
    stallAfterWrites([c], 1, STALL_MS);
    const started = performance.now();
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000, wait: 0 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(STALL_MS);
    // A real grant: the server holds the key for this lease.
    expect(await c.pttl(`lock:{${key}}`)).toBeGreaterThan(0);
    await lease.release();
    expect(await c.exists(`lock:{${key}}`)).toBe(0);
  }, 30_000);

  it(`Redlock: a ${STALL_MS} ms stall right after all three masters are asked, nodeTimeoutMs ${TIMEOUT_MS}: granted, valid for ttl − the stall`, async () => {
    const cs = await Promise.all(masters.map((m) => client(m.url)));
    const app = await startLockApp({ redlock: { clients: cs, nodeTimeoutMs: TIMEOUT_MS } });
    apps.push(app);
    await (await app.locks.acquire(uniqueKey('stall-warm'), { purpose: 'efficiency', ttl: 5_000 })).release();

    const key = uniqueKey('stall-redlock');
    stallAfterWrites(cs, cs.length, STALL_MS);
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000, wait: 0 });
    // The stall counts against the lease: it was not valid for the time nobody could check it.
    expect(lease.remainingMs()).toBeLessThanOrEqual(5_000 - STALL_MS);
    expect(lease.remainingMs()).toBeGreaterThan(5_000 - STALL_MS - 1_000);
    for (const m of cs) expect(await m.pttl(`lock:{${key}}`)).toBeGreaterThan(0);
    await lease.release();
  }, 30_000);

  it('a server that really does not answer still fails the acquire within the timeout (control)', async () => {
    const m = masters[0];
    const c = await client(m.url);
    const app = await startLockApp({ redis: { client: c, commandTimeoutMs: TIMEOUT_MS } });
    apps.push(app);
    await (await app.locks.acquire(uniqueKey('stall-warm'), { purpose: 'efficiency', ttl: 5_000 })).release();
    m.pause();
    try {
      const started = performance.now();
      const error = await app.locks.acquire(uniqueKey('stall-paused'), { purpose: 'efficiency', ttl: 5_000, wait: 0 }).catch((e: unknown) => e);
      const took = performance.now() - started;
      expect(error).toBeInstanceOf(LockBackendUnavailableError);
      expect((error as Error).message).toContain(`no answer within ${TIMEOUT_MS} ms`);
      expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
      expect(took).toBeLessThan(TIMEOUT_MS + 3_000);
    } finally {
      m.resume();
    }
  }, 30_000);
});
