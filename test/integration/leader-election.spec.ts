import { InvalidLockOptionsError, LeaseLostError, MemoryBackend, type Lease } from '../../lib/index.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { backendsOf } from '../harness/backends-of.js';
import { LEASE_INTERNALS } from '../../lib/engine/lease.js';

// campaign() against real servers, one case per backend: candidates in separate applications
// (separate engines and clients) share the server and nothing else.

const CASES = backendCases((c) => !c.cluster);

async function eventually(check: () => boolean | Promise<boolean>, withinMs: number, what: string): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${withinMs} ms`);
    await sleep(10);
  }
}

describe.each(CASES)('campaign() on $name', ({ backend, purpose, fencing, fifo, server }) => {
  let running: BackendServer;
  const apps: LockApp[] = [];
  const start = async (): Promise<LockApp> => {
    const app = await startLockApp(running.options);
    apps.push(app);
    return app;
  };
  const opts = (more: object = {}) => ({ purpose, backend, ...more });
  /**
   * Wait until `n` candidates wait for `name` behind its leader: the server's queue (inspect()), or
   * for Redlock, which has no queue, the candidate app's in-process line (joined before its first try).
   */
  const candidatesWaiting = (candidate: LockApp, name: string, n: number): Promise<void> =>
    eventually(
      async () =>
        (fifo
          ? ((await candidate.locks.inspect(name, { backend }))?.waiters ?? 0)
          : ((backendsOf(candidate.app).get(backend) as unknown as { waiting: Map<string, string[]> }).waiting.get(name)?.length ?? 0)) >= n,
      10_000,
      `${n} candidate(s) waiting`,
    );
  beforeAll(async () => {
    running = await server();
  }, 60_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await running?.stop();
  });

  it('one leader at a time; the next candidate leads when it steps down, and at once when its application shuts down', async () => {
    const [a, b, c] = await Promise.all([start(), start(), start()]);
    const name = uniqueKey(`leader-${backend}`);
    const terms: Lease[] = [];
    const first = await a.locks.campaign(name, opts({ ttl: 2_000 }));
    terms.push(first);
    const led: string[] = [];
    const second = b.locks.campaign(name, opts({ ttl: 5_000 })).then((lease) => (led.push('b'), lease));
    if (fifo) await eventually(async () => (await a.locks.inspect(name, { backend }))?.waiters === 1, 5_000, 'b queued');
    const third = c.locks.campaign(name, opts({ ttl: 5_000 })).then((lease) => (led.push('c'), lease));
    if (fifo) await eventually(async () => (await a.locks.inspect(name, { backend }))?.waiters === 2, 5_000, 'c queued');
    // The leader outlives its ttl: renewed while its process runs, no maxHold.
    await sleep(3_000);
    expect(first.signal.aborted).toBe(false);
    expect(first.remainingMs()).toBeGreaterThan(0);
    expect(led).toEqual([]);
    await first.release();
    await eventually(() => led.length === 1, 5_000, 'a successor');
    const successor = led[0] === 'b' ? await second : await third;
    if (fifo) expect(led).toEqual(['b']);
    terms.push(successor);
    const successorApp = led[0] === 'b' ? b : c;
    const closedAt = Date.now();
    await successorApp.close();
    await eventually(() => led.length === 2, 5_000, 'the last candidate after shutdown');
    expect(Date.now() - closedAt).toBeLessThan(3_000);
    const last = led[1] === 'b' ? await second : await third;
    terms.push(last);
    if (fencing) expect(terms[0].token! < terms[1].token! && terms[1].token! < terms[2].token!).toBe(true);
    await last.release();
  }, 60_000);

  it('its signal: a waiting candidate stops (rejects with the reason); a leader steps down and the next one leads', async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const name = uniqueKey(`leader-signal-${backend}`);
    const stepDown = new AbortController();
    const leader = await a.locks.campaign(name, opts({ ttl: 3_000, signal: stepDown.signal }));
    const giveUp = new AbortController();
    const quitter = b.locks.campaign(name, opts({ ttl: 3_000, signal: giveUp.signal }));
    // It is a waiting candidate when it gives up.
    await candidatesWaiting(b, name, 1);
    giveUp.abort(new Error('no longer a candidate'));
    await expect(quitter).rejects.toThrow('no longer a candidate');
    const next = b.locks.campaign(name, opts({ ttl: 3_000 }));
    // The next one waits behind the leader when it steps down.
    await candidatesWaiting(b, name, 1);
    stepDown.abort();
    const lease = await next;
    expect(LEASE_INTERNALS.held(leader)).toBe(false);
    if (fencing) expect(lease.token! > leader.token!).toBe(true);
    await lease.release();
  }, 30_000);

  it("a leader force-released by an operator is told; the candidate behind it leads", async () => {
    const [a, b] = await Promise.all([start(), start()]);
    const name = uniqueKey(`leader-force-${backend}`);
    const leader = await a.locks.campaign(name, opts({ ttl: 3_000 }));
    const next = b.locks.campaign(name, opts({ ttl: 3_000 }));
    // The candidate waits behind the leader when the operator steps in.
    await candidatesWaiting(b, name, 1);
    expect(await b.locks.forceRelease(name, { backend })).toBe(true);
    const lease = await next;
    // Redlock's holder learns at its next renewal (ttl/3).
    await eventually(() => leader.signal.aborted, 5_000, 'the old leader told');
    expect(leader.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lease.signal.aborted).toBe(false);
    await lease.release();
  }, 30_000);
});

describe('campaign(): bad input fails closed', () => {
  it('refuses bad names and options, and a campaign for a name this async context holds', async () => {
    const app = await startLockApp({ memory: {} });
    try {
      await expect(app.locks.campaign('', { purpose: 'efficiency' })).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'key' });
      await expect(app.locks.campaign('x', { purpose: 'efficiency', wait: 5 } as never)).rejects.toMatchObject({ field: 'wait' });
      await expect(app.locks.campaign('x', { purpose: 'efficiency', ttl: 0.5 })).rejects.toMatchObject({ field: 'ttl' });
      await expect(app.locks.campaign('x', {} as never)).rejects.toMatchObject({ field: 'purpose' });
      await app.locks.using('x', { purpose: 'efficiency' }, async () => {
        await expect(app.locks.campaign('x', { purpose: 'efficiency' })).rejects.toMatchObject({ field: 'name' });
      });
      const aborted = AbortSignal.abort(new Error('already'));
      await expect(app.locks.campaign('x', { purpose: 'efficiency', signal: aborted })).rejects.toThrow('already');
      expect(await app.locks.inspect('x', { purpose: 'efficiency' })).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('a signal aborted as the grant comes in: the campaign rejects and leaves the name free (adversarial review)', async () => {
    const app = await startLockApp({ memory: {} });
    try {
      const stop = new AbortController();
      app.locks.events.on('acquired', (e) => {
        if (e.kind === 'leader') stop.abort(new Error('stopped at the grant'));
      });
      await expect(app.locks.campaign('n', { purpose: 'efficiency', signal: stop.signal })).rejects.toThrow('stopped at the grant');
      expect(await app.locks.inspect('n', { purpose: 'efficiency' })).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('a candidate waiting at shutdown rejects, and leaves nothing behind', async () => {
    const shared = new MemoryBackend('shared');
    const a = await startLockApp({ backends: { shared } });
    const b = await startLockApp({ backends: { shared } });
    const leader = await a.locks.campaign('l', { purpose: 'efficiency' });
    const waiting = b.locks.campaign('l', { purpose: 'efficiency' });
    // It waits (queued behind the leader) when its app shuts down.
    await eventually(async () => ((await a.locks.inspect('l', { purpose: 'efficiency' }))?.waiters ?? 0) >= 1, 10_000, 'the candidate queued');
    await b.close();
    await expect(waiting).rejects.toThrow(/shutting down/);
    expect((await a.locks.inspect('l', { purpose: 'efficiency' }))?.waiters).toBe(0);
    await leader.release();
    await a.close();
  });
});
