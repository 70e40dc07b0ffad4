import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import zookeeper from 'node-zookeeper-client';
import { DistributedLockHealthIndicator, InvalidLockOptionsError, LeaseLostError, LockBusyError, RedisFence, StaleFencingTokenError } from '../../lib/index.js';
import { watchConnection } from '../../lib/backends/zookeeper/zookeeper-connection.js';
import { backendsOf } from '../harness/backends-of.js';
import { redisUrl, sleep, startLockApp, uniqueKey, until, type LockApp } from '../harness/lock-app.js';
import { TcpProxy } from '../harness/tcp-proxy.js';
import { LockWorker } from '../harness/worker.js';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';
import { listensOn } from '../harness/servers.mjs';

// The ZooKeeper backend against a real ZooKeeper 3.8 this spec starts (its own zoo.cfg, tick
// 500 ms: sessions of 1–10 s), so it can kill and restart it.

type RawClient = ReturnType<typeof zookeeper.createClient>;
const raw = <T>(fn: (cb: (error: Error | null, value: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((error, value) => (error ? reject(error) : resolve(value))));

/** R running, S sleeping, T stopped… (the third field of /proc/<pid>/stat), or why it cannot be read. */
function processState(pid: number): string {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[0];
    // Every thread's state by count, and the pending signals (a stop that has not taken yet shows there).
    const threads: Record<string, number> = {};
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        const t = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8').replace(/^.*\) /, '').split(' ')[0];
        threads[t] = (threads[t] ?? 0) + 1;
      } catch {
        threads['?'] = (threads['?'] ?? 0) + 1;
      }
    }
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string): string => new RegExp(`^${name}:\\s*(\\S+)`, 'm').exec(status)?.[1] ?? '?';
    return `${state} (threads ${JSON.stringify(threads)}, SigPnd ${field('SigPnd')}, ShdPnd ${field('ShdPnd')})`;
  } catch (error) {
    return `unreadable (${(error as Error).message})`;
  }
}

/** A connected raw client (watched like the module's own, so a restart cannot wedge it). */
async function rawClient(connectionString: string, sessionTimeout: number): Promise<RawClient> {
  const client = zookeeper.createClient(connectionString, { sessionTimeout, spinDelay: 100 });
  client.connect();
  await new Promise((resolve) => client.once('connected', resolve));
  return client;
}

/**
 * The application's client, with the answers to some requests held back on the client side (as a
 * client busy with other work, or a slow link inbound, would deliver them): `slow.getChildren = 1300`.
 */
function slowed(client: RawClient, slow: Partial<Record<'create' | 'getChildren' | 'exists', number>>): RawClient {
  return new Proxy(client, {
    get(target, prop) {
      const value = target[prop];
      if (typeof value !== 'function') return value;
      if (prop === 'create' || prop === 'getChildren' || prop === 'exists') {
        return (...args: any[]) => {
          const callback = args.pop();
          const ms = slow[prop as keyof typeof slow] ?? 0;
          return value.call(target, ...args, (...answer: unknown[]) => (ms > 0 ? setTimeout(() => callback(...answer), ms) : callback(...answer)));
        };
      }
      if (prop === 'transaction') {
        // A plain lock's create goes in a multi-op (with a write of its parent): slowed as a create.
        return () => {
          const transaction = value.call(target);
          const commit = transaction.commit.bind(transaction);
          transaction.commit = (callback: (...answer: unknown[]) => void) => {
            const creates = (transaction.ops as Array<{ type: number }>).some((op) => op.type === CREATE_OP);
            const ms = creates ? (slow.create ?? 0) : 0;
            commit((...answer: unknown[]) => (ms > 0 ? setTimeout(() => callback(...answer), ms) : callback(...answer)));
          };
          return transaction;
        };
      }
      return value.bind(target);
    },
  });
}
/** ZooKeeper's create operation code (in a multi-op's `ops`). */
const CREATE_OP = 1;

const exitWorker = path.resolve('.tmp/compiled/test/workers/process-exit-worker.js');

/** Run the process-exit worker on ZooKeeper; whether it exited by itself within `limitMs` (else killed by PID). */
function runExitWorker(env: Record<string, string>, limitMs: number): Promise<{ exited: boolean; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [exitWorker], { env: { ...process.env, WORKER_BACKEND: 'zookeeper', WORKER_KEY: uniqueKey('zk-exit'), ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve({ exited: false, output });
    }, limitMs);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve({ exited: true, output });
    });
  });
}

describe('ZooKeeper backend: ephemeral sequential znodes, zxid fencing tokens, session-bound leases', () => {
  let server: ZooKeeperServer;
  let a: LockApp;
  let b: LockApp;
  let inspector: RawClient;
  let unwatch: (() => void) | undefined;
  const apps: LockApp[] = [];
  const start = async (options: Record<string, unknown> = {}, others: Record<string, unknown> = {}): Promise<LockApp> => {
    const app = await startLockApp({ zookeeper: { connectionString: server.connectionString, sessionTimeoutMs: 4_000, ...options }, ...others });
    apps.push(app);
    return app;
  };
  /** The children of a lock's parent znode (its holder and queue), [] when the parent is gone. */
  const line = (key: string): Promise<string[]> =>
    raw<string[]>((cb) => inspector.getChildren(`/nest-distributed-lock/${encodeURIComponent(key).replaceAll('.', '%2E')}`, cb)).catch((e: { code?: number }) => {
      if (e.code === -101) return [];
      throw e;
    });

  beforeAll(async () => {
    server = await ZooKeeperServer.start();
    a = await start();
    b = await start();
    inspector = zookeeper.createClient(server.connectionString, { sessionTimeout: 10_000, spinDelay: 100 });
    inspector.connect();
    await new Promise((resolve) => inspector.once('connected', resolve));
    // The client alone can sit in a handshake that never ends after the restarts below.
    unwatch = watchConnection(inspector);
  }, 60_000);
  afterAll(async () => {
    unwatch?.();
    inspector?.close();
    for (const app of apps) await app.close();
    await server?.stop();
  });

  it('serves both purposes alone: one holder at a time, every new holder a larger token, and nothing left behind', async () => {
    const key = uniqueKey('zk-mutex');
    let last = 0n;
    for (const purpose of ['efficiency', 'correctness'] as const) {
      const first = await a.locks.acquire(`${key}:${purpose}`, { purpose, ttl: 5_000 });
      expect(first.backend).toBe('zookeeper');
      expect(typeof first.token).toBe('bigint');
      expect(first.token!).toBeGreaterThan(last);
      expect(await b.locks.tryAcquire(`${key}:${purpose}`, { purpose })).toBeNull();
      // The single try left no znode behind: only the holder's.
      expect(await line(`${key}:${purpose}`)).toHaveLength(1);
      await first.release();
      const second = (await b.locks.tryAcquire(`${key}:${purpose}`, { purpose }))!;
      expect(second).not.toBeNull();
      expect(second.token!).toBeGreaterThan(first.token!);
      last = second.token!;
      await second.release();
      expect(await line(`${key}:${purpose}`)).toEqual([]);
    }
  });

  it('serves waiters in arrival order, each watching only its predecessor; an aborted waiter deletes its znode and does not hold up the line', async () => {
    const key = uniqueKey('zk-fifo');
    const holder = await a.locks.acquire(key, { purpose: 'correctness', ttl: 10_000 });
    const busy = await b.locks.acquire(key, { purpose: 'correctness', wait: 0 }).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(LockBusyError);
    const order: string[] = [];
    const tokens: bigint[] = [holder.token!];
    const gone = new AbortController();
    const waiters: Array<Promise<unknown>> = [];
    for (const [i, [name, app]] of ([['first', b], ['aborted', a], ['second', a], ['third', b]] as const).entries()) {
      const signal = name === 'aborted' ? gone.signal : undefined;
      waiters.push(
        app.locks
          .using(key, { purpose: 'correctness', ttl: 5_000, wait: 10_000, signal }, async (lease) => {
            order.push(name);
            tokens.push(lease.token!);
            await sleep(30);
          })
          .catch((e: unknown) => (name === 'aborted' ? e : Promise.reject(e))),
      );
      // Arrival order: each one's znode is in the line (behind the holder's) before the next asks.
      await until(async () => (await line(key)).length >= i + 2, 10_000, `${name} in line`);
    }
    expect(await line(key)).toHaveLength(5);
    gone.abort(new Error('the caller gave up'));
    // The aborted waiter deletes its znode.
    await until(async () => (await line(key)).length === 4, 10_000, 'the aborted waiter\'s znode deleted');
    expect(await line(key)).toHaveLength(4);
    await holder.release();
    const results = await Promise.all(waiters);
    expect(order).toEqual(['first', 'second', 'third']);
    expect((results[1] as Error).message).toMatch(/gave up/);
    expect([...tokens].sort((x, y) => (x < y ? -1 : 1))).toEqual(tokens);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(await line(key)).toEqual([]);
  }, 30_000);

  it('excludes across processes: while a worker process holds the key this one waits, then takes it with a larger token', async () => {
    const key = uniqueKey('zk-processes');
    const worker = await LockWorker.start({ zookeeper: server.connectionString });
    try {
      worker.send({ op: 'acquire', key, ttl: 10_000, wait: 0, purpose: 'correctness' });
      const held = await worker.next('acquired');
      expect(await a.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
      const waiting = a.locks.acquire(key, { purpose: 'correctness', wait: 5_000 });
      // This one waits: its znode is in line behind the worker's before the worker lets go.
      await until(async () => (await line(key)).length >= 2, 10_000, 'the waiter in line');
      worker.send({ op: 'release' });
      await worker.next('released');
      const mine = await waiting;
      expect(mine.token!).toBeGreaterThan(BigInt(held.token!));
      await mine.release();
    } finally {
      worker.send({ op: 'exit' });
    }
  }, 30_000);

  it("a holder process frozen (SIGSTOP) past its session: the server ends the session, the next holder's token is larger, and the frozen one's late fenced write is refused", async () => {
    const key = uniqueKey('zk-pause');
    const redis = new Redis(redisUrl());
    const fence = new RedisFence(redis);
    const worker = await LockWorker.start({ zookeeper: server.connectionString, zkSessionMs: 2_000 });
    try {
      // Its own ttl (30 s) is far longer than its session: only the session can end it.
      worker.send({ op: 'acquire', key, ttl: 30_000, wait: 0, purpose: 'correctness' });
      const granted = await worker.next('acquired');
      worker.pause();
      const pausedAt = Date.now();
      const next = await a.locks.acquire(key, { purpose: 'correctness', ttl: 5_000, wait: 15_000 });
      const waitedMs = Date.now() - pausedAt;
      // Not before the session timeout (2 s), and not the lock's own ttl (30 s).
      expect(waitedMs).toBeGreaterThanOrEqual(1_900);
      expect(waitedMs).toBeLessThan(10_000);
      expect(next.token!).toBeGreaterThan(BigInt(granted.token!));
      await fence.write(key, 'from the new holder', next.token!);
      worker.resume();
      // Woken, the frozen holder learns at once that its lease is gone…
      const lost = await worker.next('lost', 5_000);
      expect(['session-lost', 'expired']).toContain(lost.reason);
      // …and a write it had in hand is refused by the resource.
      worker.send({ op: 'fenced-write', url: redisUrl(), key, value: 'late write of the frozen holder' });
      const refused = await worker.next('error');
      expect(refused.name).toBe(StaleFencingTokenError.name);
      expect(await fence.read(key)).toBe('from the new holder');
      await next.release();
    } finally {
      worker.resume();
      worker.send({ op: 'exit' });
      redis.disconnect();
    }
  }, 40_000);

  it('never claims more than the session guarantees: remainingMs() is at most the session timeout however long the ttl', async () => {
    const short = await start({ sessionTimeoutMs: 2_000 });
    const lease = await short.locks.acquire(uniqueKey('zk-remaining'), { purpose: 'correctness', ttl: 60_000 });
    try {
      expect(lease.remainingMs()).toBeLessThanOrEqual(2_000);
      expect(lease.remainingMs()).toBeGreaterThan(1_500);
      // Renewed by the backend's own reads while held: still valid well past one session timeout.
      await sleep(2_600);
      expect(lease.signal.aborted).toBe(false);
      expect(lease.remainingMs()).toBeGreaterThan(500);
    } finally {
      await lease.release();
    }
    // Asked for 60 s, the server (tick 500 ms: at most 20 ticks) grants 10 s: the lease counts on that.
    const greedy = await start({ sessionTimeoutMs: 60_000 });
    const capped = await greedy.locks.acquire(uniqueKey('zk-granted'), { purpose: 'correctness', ttl: 60_000 });
    expect(capped.remainingMs()).toBeLessThanOrEqual(10_000);
    expect(capped.remainingMs()).toBeGreaterThan(9_000);
    await capped.release();
  }, 20_000);

  it('kill -9 of ZooKeeper and a restart within the session: the lease survives (same session, same znode), and tokens keep growing', async () => {
    const key = uniqueKey('zk-restart');
    const before = await a.locks.acquire(key, { purpose: 'correctness', ttl: 30_000 });
    await server.kill9();
    await server.restart();
    // The client reconnects to the restarted server with its session (ZooKeeper persisted it).
    await sleep(1_500);
    expect(before.signal.aborted).toBe(false);
    expect(await b.locks.tryAcquire(key, { purpose: 'correctness' })).toBeNull();
    await before.release();
    const after = await b.locks.acquire(key, { purpose: 'correctness', wait: 5_000 });
    expect(after.token!).toBeGreaterThan(before.token!);
    await after.release();
  }, 60_000);

  it('a server down longer than the session: the holder is told at its validity end (signal aborted) and a new session serves the next lock', async () => {
    const app = await start({ sessionTimeoutMs: 2_000, commandTimeoutMs: 500 });
    const key = uniqueKey('zk-down');
    const lease = await app.locks.acquire(key, { purpose: 'correctness', ttl: 30_000 });
    const lost = new Promise<number>((resolve) => lease.signal.addEventListener('abort', () => resolve(Date.now())));
    const downAt = Date.now();
    await server.kill9();
    try {
      const at = await lost;
      // Told at its validity end: within the 2 s session of its last answer (bound: twice that).
      expect(at - downAt).toBeLessThan(4_000);
      expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    } finally {
      await server.restart();
    }
    const again = await app.locks.acquire(key, { purpose: 'correctness', wait: 15_000 });
    expect(again.token!).toBeGreaterThan(lease.token!);
    await again.release();
  }, 60_000);

  it('answers pingCheck("zookeeper") up, down while the server is stopped, and up again; routes by purpose beside Redis', async () => {
    const both = await start({}, { redis: { url: redisUrl() } });
    const fast = await both.locks.acquire(uniqueKey('route-e'), { purpose: 'efficiency' });
    const safe = await both.locks.acquire(uniqueKey('route-c'), { purpose: 'correctness' });
    expect([fast.backend, safe.backend]).toEqual(['redis', 'zookeeper']);
    await Promise.all([fast.release(), safe.release()]);
    const health = both.app.get(DistributedLockHealthIndicator);
    expect(await health.pingCheck('zookeeper')).toMatchObject({ zookeeper: { status: 'up', backend: 'zookeeper', purposes: ['correctness'] } });
    server.pause();
    try {
      // (Seen "up" once in a run of the second phase after the harness's port fix, never alone:
      // the failure says what state the server's process was in, and who listened on its port.)
      const before = processState(server.pid!);
      const paused = await health.pingCheck('zookeeper', { timeout: 500 });
      const port = Number(server.connectionString.split(':')[1]);
      const seen = `${JSON.stringify(paused)}; JVM ${server.pid} state ${before} → ${processState(server.pid!)}, listens on ${port}: ${listensOn(server.pid!, port)}`;
      expect({ ...paused, seen }).toMatchObject({ zookeeper: { status: 'down' }, seen });
    } finally {
      server.resume();
    }
    expect(await health.pingCheck('zookeeper', { timeout: 3_000 })).toMatchObject({ zookeeper: { status: 'up' } });
  }, 30_000);

  it('keys with slashes, dots, braces and non-ASCII are distinct locks; a lone surrogate is refused naming the key', async () => {
    const base = uniqueKey('zk-odd');
    const keys = ['.', '..', '/', 'a/b', 'a%2Fb', '{x}', '}', 'ключ', '🔒', `${base}`, ' ', 'zookeeper'];
    const leases = await Promise.all(keys.map((k) => a.locks.acquire(`${base}${k}`, { purpose: 'correctness' })));
    expect(new Set(leases.map((l) => l.key)).size).toBe(keys.length);
    await Promise.all(leases.map((l) => l.release()));
    await expect(a.locks.acquire('k\uD800', { purpose: 'correctness' })).rejects.toThrow(InvalidLockOptionsError);
  });

  it('an application-owned client is used and never closed; bad options fail at bootstrap naming the field', async () => {
    const own = zookeeper.createClient(server.connectionString, { sessionTimeout: 4_000 });
    own.connect();
    await new Promise((resolve) => own.once('connected', resolve));
    try {
      const app = await startLockApp({ zookeeper: { client: own } });
      const lease = await app.locks.acquire(uniqueKey('zk-own'), { purpose: 'correctness' });
      expect(lease.backend).toBe('zookeeper');
      await lease.release();
      await app.close();
      expect(await raw((cb) => own.exists('/', cb))).not.toBeNull();
    } finally {
      own.close();
    }
    for (const [options, field] of [
      [{ connectionString: 'not a host' }, 'zookeeper.connectionString'],
      [{ connectionString: server.connectionString, prefix: 'relative' }, 'zookeeper.prefix'],
      [{ connectionString: server.connectionString, prefix: '/zookeeper/x' }, 'zookeeper.prefix'],
      [{ connectionString: server.connectionString, sessionTimeoutMs: 1.5 }, 'zookeeper.sessionTimeoutMs'],
      [{}, 'zookeeper.connectionString'],
    ] as const) {
      const failed = await startLockApp({ zookeeper: options as never }).catch((e: unknown) => e);
      expect(failed).toBeInstanceOf(InvalidLockOptionsError);
      expect((failed as InvalidLockOptionsError).field).toBe(field);
    }
  });

  it('closing the app deletes its waiters\' znodes and the empty lines it used', async () => {
    const app = await start();
    const key = uniqueKey('zk-close');
    const holder = await a.locks.acquire(key, { purpose: 'correctness', ttl: 10_000 });
    const waiting = app.locks.acquire(key, { purpose: 'correctness', wait: 10_000 }).catch((e: unknown) => e);
    // The waiter's znode is in line before the app closes.
    await until(async () => (await line(key)).length >= 2, 10_000, 'the waiter in line');
    expect(await line(key)).toHaveLength(2);
    await app.close();
    expect(await waiting).toBeInstanceOf(Error);
    expect(await line(key)).toHaveLength(1);
    await holder.release();
    await a.close();
    a = await start();
    expect(await raw((cb) => inspector.exists(`/nest-distributed-lock/${encodeURIComponent(key)}`, cb))).toBeNull();
    expect(backendsOf(a.app).get('zookeeper')?.name).toBe('zookeeper');
  }, 30_000);

  it('writes with an unknown outcome leave no znode behind: a create answered late is undone, an unanswered release retried', async () => {
    const proxy = await TcpProxy.start(server.port);
    const app = await start({ connectionString: proxy.endpoint, commandTimeoutMs: 300 });
    const key = uniqueKey('zk-late');
    const waitFor = async (check: () => Promise<boolean>): Promise<void> => {
      for (let i = 0; i < 100 && !(await check()); i++) await sleep(50);
    };
    try {
      await app.locks.tryAcquire(uniqueKey('zk-late-warm'), { purpose: 'correctness' }).then((l) => l?.release());
      // The create reaches ZooKeeper, but its answer comes after we stopped waiting.
      proxy.delay(700);
      await expect(app.locks.tryAcquire(key, { purpose: 'correctness' })).rejects.toThrow(/no answer within 300 ms/);
      proxy.heal();
      // The delayed create lands ~700 ms after it was sent; its answer, later still, undoes it.
      await sleep(1_200);
      await waitFor(async () => (await line(key)).length === 0);
      expect(await line(key)).toEqual([]);
      // A release lost with its connection (sent, then the link reset): the client reconnects to
      // the same session, whose znode is still there — deleted by the retry.
      const held = await app.locks.acquire(key, { purpose: 'correctness', ttl: 30_000 });
      proxy.blackhole();
      const releasing = held.release().catch((e: unknown) => e);
      await sleep(100);
      proxy.cut();
      proxy.heal();
      expect(await releasing).toBeInstanceOf(Error);
      expect(await line(key)).toHaveLength(1);
      await waitFor(async () => (await line(key)).length === 0);
      expect(await line(key)).toEqual([]);
      const next = await b.locks.acquire(key, { purpose: 'correctness', wait: 1_000 });
      expect(next.token!).toBeGreaterThan(held.token!);
      await next.release();
    } finally {
      proxy.heal();
      await app.close();
      await proxy.close();
    }
  }, 30_000);

  it('a connection whose session handshake is never answered is reset, and locks work again (the client alone would wait for good)', async () => {
    const proxy = await TcpProxy.start(server.port);
    const app = await start({ connectionString: proxy.endpoint, commandTimeoutMs: 500 });
    try {
      await app.locks.tryAcquire(uniqueKey('zk-handshake-warm'), { purpose: 'correctness' }).then((l) => l?.release());
      // Reconnecting into a server that accepts the connection and never answers the handshake.
      proxy.drop();
      proxy.cut();
      await sleep(300);
      proxy.heal();
      const healedAt = Date.now();
      let lease: Awaited<ReturnType<typeof app.locks.tryAcquire>> = null;
      while (!lease && Date.now() - healedAt < 10_000) {
        lease = await app.locks.tryAcquire(uniqueKey('zk-handshake'), { purpose: 'correctness' }).catch(() => null);
        if (!lease) await sleep(100);
      }
      expect(lease).not.toBeNull();
      expect(Date.now() - healedAt).toBeLessThan(6_000);
      await lease!.release();
    } finally {
      proxy.heal();
      await app.close();
      await proxy.close();
    }
  }, 30_000);

  // Review findings (an adversarial run against this backend), each watched failing before its fix.
  it('a grant whose answer comes after the session could have expired is refused: never a second holder (finding 1)', async () => {
    const own = await rawClient(server.connectionString, 1_000);
    const slow: Partial<Record<'getChildren', number>> = {};
    const w = await startLockApp({ zookeeper: { client: slowed(own, slow) } });
    const key = uniqueKey('zk-late-grant');
    try {
      await (await w.locks.acquire(key, { purpose: 'correctness' })).release();
      // The read that finds W first comes back 1.3 s later: past W's 1 s session.
      slow.getChildren = 1_300;
      const late = await w.locks.acquire(key, { purpose: 'correctness', ttl: 20_000, wait: 0 }).catch((e: unknown) => e);
      slow.getChildren = 0;
      expect(late).toBeInstanceOf(Error);
      expect((late as Error).message).toMatch(/could have expired; not granted/);
      const x = await b.locks.acquire(key, { purpose: 'correctness', wait: 3_000 });
      expect(await line(key)).toHaveLength(1);
      await x.release();
    } finally {
      await w.close();
      own.close();
    }
  }, 30_000);

  it('an application client whose session was presumed lost keeps serving once it answers again (finding 5)', async () => {
    const own = await rawClient(server.connectionString, 2_000);
    const slow: Partial<Record<'exists' | 'create', number>> = {};
    const app = await startLockApp({ zookeeper: { client: slowed(own, slow), commandTimeoutMs: 500 } });
    try {
      const held = await app.locks.acquire(uniqueKey('zk-presumed'), { purpose: 'correctness', ttl: 30_000 });
      // Nothing answered in time for longer than the session: the holder is told.
      slow.exists = 1_000;
      slow.create = 1_000;
      await new Promise((resolve) => held.signal.addEventListener('abort', resolve));
      await expect(app.locks.acquire(uniqueKey('zk-presumed'), { purpose: 'correctness' })).rejects.toThrow();
      slow.exists = 0;
      slow.create = 0;
      const again = await app.locks.acquire(uniqueKey('zk-presumed'), { purpose: 'correctness' });
      expect(again.backend).toBe('zookeeper');
      await again.release();
    } finally {
      await app.close();
      own.close();
    }
  }, 30_000);

  it('closing the app while a create is in flight leaves no znode on the application\'s client (finding 3)', async () => {
    const own = await rawClient(server.connectionString, 4_000);
    const app = await startLockApp({ zookeeper: { client: slowed(own, { create: 400 }) } });
    const key = uniqueKey('zk-close-in-flight');
    const first = app.locks.acquire(key, { purpose: 'correctness' }).catch((e: unknown) => e);
    // The create is in flight: it reached ZooKeeper (its znode is there), its answer is held 400 ms.
    await until(async () => (await line(key)).length >= 1, 10_000, 'the create reached ZooKeeper');
    await app.close();
    expect(await first).toBeInstanceOf(Error);
    // Its answer comes ~400 ms after it was sent; the znode it made is then deleted.
    await until(async () => (await line(key)).length === 0, 10_000, 'the late create undone');
    expect(await line(key)).toEqual([]);
    expect(own.getState().code).toBe(3); // the application's client stays connected
    own.close();
  }, 30_000);

  it('a closed app leaves no process behind: closed while connecting, after a use, after a failed bootstrap (finding 4)', async () => {
    for (const scenario of ['close-connecting', 'close', 'bootstrap-fail']) {
      const r = await runExitWorker({ WORKER_SCENARIO: scenario, WORKER_ZOOKEEPER: server.connectionString }, 15_000);
      expect({ scenario, exited: r.exited }).toEqual({ scenario, exited: true });
      expect(r.output).toContain(scenario === 'bootstrap-fail' ? 'lock used' : 'closed');
    }
  }, 60_000);

  it('a server that grants a shorter session on reconnect shortens the lease at once (finding 2)', async () => {
    const app = await start({ sessionTimeoutMs: 10_000 });
    const lease = await app.locks.acquire(uniqueKey('zk-regrant'), { purpose: 'correctness', ttl: 30_000 });
    expect(lease.remainingMs()).toBeGreaterThan(9_000);
    try {
      server.configure({ maxSessionTimeoutMs: 2_000 });
      await server.restart();
      let remaining = lease.remainingMs();
      for (let i = 0; i < 100 && remaining > 2_000; i++) {
        await sleep(50);
        remaining = lease.remainingMs();
      }
      expect(remaining).toBeLessThanOrEqual(2_000);
    } finally {
      server.configure();
      await server.restart();
    }
    await lease.release().catch(() => undefined);
  }, 60_000);

  it('an app whose session was lost before close still deletes its empty lines at close (finding 3, minor)', async () => {
    const app = await start({ sessionTimeoutMs: 1_000, commandTimeoutMs: 300 });
    const base = uniqueKey('zk-lost-then-close');
    for (let i = 0; i < 3; i++) await app.locks.using(`${base}:${i}`, { purpose: 'correctness' }, async () => undefined);
    const held = await app.locks.acquire(`${base}:held`, { purpose: 'correctness', ttl: 30_000 });
    server.pause();
    await new Promise((resolve) => held.signal.addEventListener('abort', resolve));
    server.resume();
    await app.close();
    const left = (await raw<string[]>((cb) => inspector.getChildren('/nest-distributed-lock', cb))).filter((c) => c.startsWith(encodeURIComponent(base)));
    // The held key's line may wait for its old session's expiry; the others are empty and gone.
    expect(left.filter((c) => !c.endsWith('held'))).toEqual([]);
  }, 30_000);

  it("an application client whose session the server expired: locks fail saying what to do", async () => {
    const proxy = await TcpProxy.start(server.port);
    const own = await rawClient(proxy.endpoint, 2_000);
    const app = await startLockApp({ zookeeper: { client: own } });
    try {
      await (await app.locks.acquire(uniqueKey('zk-expired'), { purpose: 'correctness' })).release();
      // Silent for longer than its session: the server expires it; the reconnect learns so.
      proxy.drop();
      await sleep(3_500);
      proxy.cut();
      proxy.heal();
      // The client's own state says EXPIRED only for a moment; its connection manager's stays (CLOSED).
      const managerState = (): number => own.connectionManager.state;
      for (let i = 0; i < 100 && managerState() >= 0; i++) await sleep(50);
      expect([-2, -3]).toContain(managerState());
      await expect(app.locks.acquire(uniqueKey('zk-expired'), { purpose: 'correctness' })).rejects.toThrow(
        /zookeeper\.client\) expired .*restart the application with a new client, or configure zookeeper\.connectionString/,
      );
    } finally {
      await app.close();
      own.close();
      await proxy.close();
    }
  }, 30_000);

  it('a client of ours is closed for good when the server does not answer: its connection does not outlive the attempt or close() (simulation seed 37)', async () => {
    // Ref'd sockets of this process to the proxy (they keep it alive; a connected client of ours is unref'd).
    const socketsTo = (port: number): number =>
      (process as unknown as { _getActiveHandles(): Array<{ remotePort?: number; destroyed?: boolean; constructor?: { name?: string } }> })
        ._getActiveHandles()
        .filter((h) => h.constructor?.name === 'Socket' && h.remotePort === port && !h.destroyed).length;
    const proxy = await TcpProxy.start(server.port);
    try {
      // 1. A server that accepts the connection and never answers the handshake: the connect
      //    attempt gives up after connectTimeoutMs — and its connection must go with it.
      proxy.drop();
      const silent = await start({ connectionString: proxy.endpoint, connectTimeoutMs: 500, commandTimeoutMs: 500 });
      await expect(silent.locks.tryAcquire(uniqueKey('zk-close-silent'), { purpose: 'correctness' })).rejects.toThrow(/not connected within 500 ms/);
      const gaveUpAt = Date.now();
      while ((socketsTo(proxy.port) > 0 || proxy.openConnections > 0) && Date.now() - gaveUpAt < 4_000) await sleep(100);
      expect({ keepsProcessAlive: socketsTo(proxy.port), open: proxy.openConnections }).toEqual({ keepsProcessAlive: 0, open: 0 });
      await silent.close();

      // 2. A connected client whose server stops answering before close(): the session's close
      //    request goes unanswered, and close() still leaves no connection behind.
      //    (A long session: the server's own expiry of it must not be what ends the connection.)
      proxy.heal();
      const app = await start({ connectionString: proxy.endpoint, sessionTimeoutMs: 10_000, connectTimeoutMs: 500, commandTimeoutMs: 500 });
      await (await app.locks.acquire(uniqueKey('zk-close-silent'), { purpose: 'correctness' })).release();
      expect(proxy.openConnections).toBe(1);
      proxy.drop();
      const closing = Date.now();
      await app.close();
      while (proxy.openConnections > 0 && Date.now() - closing < 4_000) await sleep(100);
      expect(proxy.openConnections).toBe(0);
    } finally {
      proxy.heal();
      await proxy.close();
    }
  }, 40_000);

  it('leaves nothing behind after many distinct keys: every empty line is deleted at close', async () => {
    const app = await start();
    const base = uniqueKey('zk-many');
    for (let i = 0; i < 1_200; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => app.locks.using(`${base}:${i + j}`, { purpose: 'correctness' }, async () => undefined)));
    }
    const lines = async (): Promise<number> =>
      (await raw<string[]>((cb) => inspector.getChildren('/nest-distributed-lock', cb))).filter((c) => c.startsWith(encodeURIComponent(base))).length;
    expect(await lines()).toBe(1_200);
    await app.close();
    expect(await lines()).toBe(0);
  }, 60_000);
});
