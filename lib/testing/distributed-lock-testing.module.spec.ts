import { Controller, Injectable, Post } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { setTimeout as delay } from 'node:timers/promises';
import {
  DistributedLock,
  DistributedLockHealthIndicator,
  DistributedLockService,
  LeaseLostError,
  LockBackendUnavailableError,
  LockBusyError,
} from 'nest-distributed-lock';
import { DistributedLockTestingModule, TestingLockBackend } from 'nest-distributed-lock/testing';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What a user would write: the code under test. */
@Injectable()
class Billing {
  runs = 0;
  seenSignal?: AbortSignal;

  @DistributedLock({ purpose: 'efficiency', key: 'invoices', ttl: 5_000 })
  async sendInvoices(): Promise<string> {
    this.runs += 1;
    return 'sent';
  }

  @DistributedLock({ purpose: 'efficiency', key: 'digest', onBusy: 'skip' })
  async digest(): Promise<string> {
    this.runs += 1;
    return 'digest';
  }

  /** Long work that stops when its lease is lost (hard cancel). */
  @DistributedLock({ purpose: 'correctness', key: (id: string) => `account:${id}`, rejectOnLoss: true })
  async settle(_id: string, locks: DistributedLockService): Promise<bigint> {
    this.seenSignal = locks.current()!.signal;
    await delay(2_000, undefined, { signal: this.seenSignal }).catch(() => undefined); // stops early when lost
    return locks.current()!.token!;
  }
}

@Controller('reports')
class ReportsController {
  @Post()
  @DistributedLock({ purpose: 'efficiency', key: 'report' })
  async build(): Promise<{ ok: true }> {
    return { ok: true };
  }
}

describe('DistributedLockTestingModule (nest-distributed-lock/testing): busy, lost and unavailable paths without servers', () => {
  let moduleRef: TestingModule;
  let billing: Billing;
  let backend: TestingLockBackend;
  let locks: DistributedLockService;

  beforeEach(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [DistributedLockTestingModule.forRoot()],
      providers: [Billing],
    }).compile();
    await moduleRef.init();
    billing = moduleRef.get(Billing);
    backend = moduleRef.get(TestingLockBackend);
    locks = moduleRef.get(DistributedLockService);
  });

  afterEach(async () => {
    await moduleRef.close();
  });

  it('a key held by "another replica" makes the method throw LockBusyError without running; it runs once released', async () => {
    const release = await backend.occupy('invoices');
    await expect(billing.sendInvoices()).rejects.toBeInstanceOf(LockBusyError);
    expect(billing.runs).toBe(0);
    await release();
    await expect(billing.sendInvoices()).resolves.toBe('sent');
    expect(billing.runs).toBe(1);
    expect(backend.isHeld('invoices')).toBe(false); // released after the run
  });

  it("onBusy: 'skip' resolves undefined and does not run", async () => {
    await backend.occupy('digest', 60_000);
    await expect(billing.digest()).resolves.toBeUndefined();
    expect(billing.runs).toBe(0);
  });

  it('expire() ends the lease mid-run: the signal aborts and the method rejects with LeaseLostError', async () => {
    const running = billing.settle('42', locks);
    // The method runs under its lease (its body has read the signal) before the test expires it.
    for (let i = 0; i < 1_000 && billing.seenSignal === undefined; i++) await sleep(5);
    expect(backend.isHeld('account:42')).toBe(true);
    expect(backend.expire('account:42')).toBe(true);
    const error = await running.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as LeaseLostError).reason).toBe('expired');
    expect(billing.seenSignal!.aborted).toBe(true);
    expect(billing.seenSignal!.reason).toBe(error);
    // The key is free for the next holder, with a larger fencing token.
    const next = await locks.acquire('account:42', { purpose: 'correctness', wait: 0 });
    expect(next.token).toBeGreaterThan(0n);
    await next.release();
    expect(backend.expire('account:42')).toBe(false); // nobody holds it
  });

  it('makeUnavailable() fails acquisitions with LockBackendUnavailableError (the method never runs) and the health check with down; restore() heals', async () => {
    const health = moduleRef.get(DistributedLockHealthIndicator);
    backend.makeUnavailable();
    await expect(billing.sendInvoices()).rejects.toBeInstanceOf(LockBackendUnavailableError);
    expect(billing.runs).toBe(0);
    expect(await health.pingCheck('memory')).toMatchObject({ memory: { status: 'down' } });
    backend.restore();
    await expect(billing.sendInvoices()).resolves.toBe('sent');
    expect(await health.pingCheck('memory')).toMatchObject({ memory: { status: 'up', purposes: ['efficiency', 'correctness'] } });
  });

  it('delayAcquisition() slows every attempt; a delay beyond the ttl is an answer that cannot be trusted', async () => {
    backend.delayAcquisition(100);
    const started = performance.now();
    await expect(billing.sendInvoices()).resolves.toBe('sent');
    expect(performance.now() - started).toBeGreaterThanOrEqual(95);
    const error = await locks.acquire('slow', { purpose: 'efficiency', ttl: 50, wait: 0 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockBackendUnavailableError);
    expect(backend.isHeld('slow')).toBe(false); // the late grant was given back
    backend.delayAcquisition(0);
  });

  it('correctness locks get strictly increasing tokens', async () => {
    const tokens: bigint[] = [];
    for (let i = 0; i < 3; i++) tokens.push(await locks.using('ledger', { purpose: 'correctness' }, (lease) => lease.token!));
    expect(tokens[1]).toBeGreaterThan(tokens[0]);
    expect(tokens[2]).toBeGreaterThan(tokens[1]);
  });

  it('reset() aborts the leases it takes away: never two unaborted holders of one key', async () => {
    const held = await locks.acquire('ledger-reset', { purpose: 'correctness', ttl: 10_000 });
    backend.reset();
    expect(held.signal.aborted).toBe(true);
    expect(held.signal.reason).toBeInstanceOf(LeaseLostError);
    const next = await locks.acquire('ledger-reset', { purpose: 'correctness', wait: 0 });
    expect(next.signal.aborted).toBe(false);
    await next.release();
  });

  it('semaphores: isHeld sees the holders, expire() ends every one, makeUnavailable() and reset() reach them too', async () => {
    const one = await locks.acquire('renderers', { purpose: 'efficiency', permits: 2 });
    const two = await locks.acquire('renderers', { purpose: 'efficiency', permits: 2 });
    expect(backend.isHeld('renderers')).toBe(true);
    expect(backend.expire('renderers')).toBe(true);
    expect(one.signal.aborted && two.signal.aborted).toBe(true);
    expect(backend.isHeld('renderers')).toBe(false);
    backend.makeUnavailable();
    await expect(locks.acquire('renderers', { purpose: 'efficiency', permits: 2 })).rejects.toBeInstanceOf(LockBackendUnavailableError);
    backend.restore();
    const three = await locks.acquire('renderers', { purpose: 'efficiency', permits: 2 });
    backend.reset();
    expect(three.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(backend.isHeld('renderers')).toBe(false);
  });

  it('a semaphore lease extends and releases like a lock (the testing backend passes the hold kind on)', async () => {
    const one = await locks.acquire('renderers', { purpose: 'efficiency', permits: 2, ttl: 1_000 });
    await one.extend(5_000);
    expect(one.signal.aborted).toBe(false);
    expect(one.remainingMs()).toBeGreaterThan(1_000);
    await one.release();
    expect(backend.isHeld('renderers')).toBe(false);
  });

  it('read-write locks: isHeld sees readers, reset() ends them, and a writer waits for them', async () => {
    const reader = await locks.acquire('config', { purpose: 'efficiency', mode: 'read' });
    const other = await locks.acquire('config', { purpose: 'efficiency', mode: 'read' });
    expect(backend.isHeld('config')).toBe(true);
    expect(await locks.tryAcquire('config', { purpose: 'efficiency' })).toBeNull();
    await reader.extend();
    backend.reset();
    expect(other.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(backend.isHeld('config')).toBe(false);
    await (await locks.acquire('config', { purpose: 'efficiency' })).release();
  });

  it('an outage while an upgrade waits: the upgrade keeps its place and completes once the backend answers (review: it rejected and left its place at the head of the line)', async () => {
    // A reader whose process died: its hold ends at its ttl.
    await backend.acquire({ key: 'doc', owner: 'gone', ttlMs: 300, queue: false, mode: 'read' });
    const lease = await locks.acquire('doc', { purpose: 'correctness', mode: 'upgradeable', ttl: 20_000 });
    const upgrading = lease.upgrade();
    await sleep(100);
    backend.makeUnavailable();
    await sleep(400);
    backend.restore();
    await upgrading;
    expect(lease.mode).toBe('write');
    expect(await locks.tryAcquire('doc', { purpose: 'correctness', mode: 'read' })).toBeNull();
    await lease.release();
    expect(backend.bookkeeping()).toEqual({ holders: [], queues: [], semaphores: [], turns: [], readers: [], waitingModes: [] });
  });

  it('reset() while an upgrade waits: the upgrade rejects and nothing is kept for it', async () => {
    const lease = await locks.acquire('doc', { purpose: 'correctness', mode: 'upgradeable' });
    await locks.acquire('doc', { purpose: 'correctness', mode: 'read' });
    const upgrading = lease.upgrade().then(() => 'upgraded', (error: Error) => error);
    await sleep(50);
    backend.reset();
    expect(await upgrading).toBeInstanceOf(LeaseLostError);
    expect(backend.bookkeeping()).toEqual({ holders: [], queues: [], semaphores: [], turns: [], readers: [], waitingModes: [] });
  });

  it('reset() frees every key for the next test', async () => {
    await backend.occupy('invoices');
    backend.makeUnavailable();
    backend.reset();
    await expect(billing.sendInvoices()).resolves.toBe('sent');
  });
});

describe('DistributedLockTestingModule over HTTP', () => {
  it('a busy handler answers 409 through the interceptor', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedLockTestingModule.forRoot()],
      controllers: [ReportsController],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const url = `${await app.getUrl()}/reports`;
      expect((await fetch(url, { method: 'POST' })).status).toBe(201);
      const release = await app.get(TestingLockBackend).occupy('report', 30_000);
      const busy = await fetch(url, { method: 'POST' });
      expect(busy.status).toBe(409);
      expect(busy.headers.get('retry-after')).not.toBeNull();
      await release();
      expect((await fetch(url, { method: 'POST' })).status).toBe(201);
    } finally {
      await app.close();
    }
  });

  it('a 503 tells the client the lock service is unavailable, without the backend\'s internals', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [DistributedLockTestingModule.forRoot()],
      controllers: [ReportsController],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      app.get(TestingLockBackend).makeUnavailable('connect ECONNREFUSED 10.0.3.7:6379');
      const response = await fetch(`${await app.getUrl()}/reports`, { method: 'POST' });
      expect(response.status).toBe(503);
      const body = await response.text();
      expect(body).not.toMatch(/10\.0\.3\.7|ECONNREFUSED|6379/);
      expect(JSON.parse(body)).toMatchObject({ statusCode: 503 });
    } finally {
      await app.close();
    }
  });
});
