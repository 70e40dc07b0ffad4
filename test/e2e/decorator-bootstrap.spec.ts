import { Injectable, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
// A value import: the decorator reads design:returntype to keep an Observable method cold.
import { interval, Observable, take } from 'rxjs';
import {
  DistributedLock,
  DistributedLockModule,
  DistributedLockService,
  InvalidLockOptionsError,
  LeaseLostError,
  LockBusyError,
  type DistributedLockOptions,
} from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, uniqueKey, until } from '../harness/lock-app.js';

async function boot(options: DistributedLockOptions, lockModule: DynamicModule): Promise<unknown> {
  @Injectable()
  class LedgerService {
    @DistributedLock(options)
    async post(): Promise<void> {}
  }
  @Module({ imports: [lockModule], providers: [LedgerService] })
  class AppModule {}
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false }).catch((e: unknown) => e);
  if (!(app instanceof Error)) {
    await (app as { close(): Promise<void> }).close();
    return undefined;
  }
  return app;
}

describe('@DistributedLock: bootstrap validation', () => {
  const redisOnly = (): DynamicModule => DistributedLockModule.forRoot({ redis: { url: redisUrl() } });

  it('refuses a correctness lock on a Redis-only configuration, naming the class, method and backend', async () => {
    const error = await boot({ purpose: 'correctness' }, redisOnly());
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as Error).message).toMatch(/LedgerService\.post/);
    expect((error as Error).message).toMatch(/correctness/);
    expect((error as Error).message).toMatch(/fencing tokens/);
  });

  it('refuses correctness routed explicitly to redis even with etcd present', async () => {
    const both = DistributedLockModule.forRoot({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } });
    const error = await boot({ purpose: 'correctness', backend: 'redis' }, both);
    expect((error as Error).message).toMatch(/LedgerService\.post.*"redis" issues no fencing tokens/);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['no purpose', {}, 'purpose'],
    ['ttl 0', { purpose: 'efficiency', ttl: 0 }, 'ttl'],
    ['an empty key', { purpose: 'efficiency', key: '' }, 'key'],
    ['a numeric key', { purpose: 'efficiency', key: 42 }, 'key'],
    ['an unknown onBusy', { purpose: 'efficiency', onBusy: 'retry' }, 'onBusy'],
    ['wait with onBusy skip', { purpose: 'efficiency', wait: 100, onBusy: 'skip' }, 'wait'],
    ['an unknown backend', { purpose: 'efficiency', backend: 'zookeeper' }, 'backend'],
    ['an unknown option', { purpose: 'efficiency', timeout: 5 }, 'timeout'],
    ['the watchdog without maxHold', { purpose: 'efficiency', watchdog: true }, 'maxHold'],
    ['lockAtLeastFor above the ttl', { purpose: 'efficiency', ttl: 1_000, lockAtLeastFor: 2_000 }, 'lockAtLeastFor'],
    ['maxHold without the watchdog', { purpose: 'efficiency', maxHold: 60_000 }, 'maxHold'],
  ])('fails app init on %s, naming the method and the field', async (_case, options, field) => {
    const error = await boot(options as unknown as DistributedLockOptions, redisOnly());
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe(field);
    expect((error as Error).message).toContain('@DistributedLock on LedgerService.post');
  });
});

describe('@DistributedLock on a plain provider method', () => {
  @Injectable()
  class Accounts {
    calls = 0;
    constructor(readonly locks: DistributedLockService) {}

    @DistributedLock({ purpose: 'correctness', key: (id: string) => `account:${id}`, ttl: 5_000 })
    async debit(id: string, hold = 0): Promise<bigint | undefined> {
      this.calls += 1;
      await sleep(hold);
      return this.locks.current()?.token;
    }

    @DistributedLock({ purpose: 'efficiency', key: (id: string) => (id === 'boom' ? (() => { throw new Error('no tenant'); })() : id) })
    async keyed(id: string): Promise<string> {
      this.calls += 1;
      return id;
    }

    @DistributedLock({ purpose: 'efficiency', key: (id: string) => `sync:${id}` })
    syncWork(id: string): string {
      return `done ${id}`;
    }
  }

  let accounts: Accounts;
  let close: () => Promise<void>;
  beforeAll(async () => {
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } })],
      providers: [Accounts],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    accounts = app.get(Accounts);
    close = () => app.close();
  });
  afterAll(() => close());

  it('runs inside the lease: current() gives the fencing token', async () => {
    const token = await accounts.debit(uniqueKey('acct'));
    expect(typeof token).toBe('bigint');
  });

  it('rejects a concurrent call with LockBusyError by default (not a silent undefined)', async () => {
    const id = uniqueKey('busy');
    const first = accounts.debit(id, 300);
    // The first call holds the key (its body runs 300 ms) when the second comes.
    await until(async () => (await accounts.locks.inspect(`account:${id}`, { purpose: 'correctness' })) !== null, 10_000, 'the first call holding the key');
    await expect(accounts.debit(id)).rejects.toBeInstanceOf(LockBusyError);
    expect(await first).toBeDefined();
  });

  it('a key function that throws fails with InvalidLockOptionsError naming the method; the method does not run', async () => {
    const before = accounts.calls;
    const error = await accounts.keyed('boom').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as Error).message).toMatch(/Accounts\.keyed.*key function threw: no tenant/);
    await expect(accounts.keyed('')).rejects.toThrow(/"key".*must not be empty/);
    expect(accounts.calls).toBe(before);
  });

  it('a synchronous method becomes async and returns its value', async () => {
    await expect(accounts.syncWork('x') as unknown as Promise<string>).resolves.toBe('done x');
  });
});

describe('@DistributedLock with rejectOnLoss', () => {
  @Injectable()
  class Slow {
    finished = 0;

    @DistributedLock({ purpose: 'efficiency', key: (id: string) => `slow:${id}`, ttl: 300, rejectOnLoss: true })
    async work(_id: string): Promise<string> {
      await sleep(1_500);
      this.finished += 1;
      return 'done';
    }

    @DistributedLock({ purpose: 'efficiency', key: (id: string) => `slow-stream:${id}`, ttl: 300, rejectOnLoss: true })
    stream(_id: string): Observable<number> {
      return interval(100).pipe(take(30));
    }
  }

  let slow: Slow;
  let close: () => Promise<void>;
  beforeAll(async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() } })], providers: [Slow] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    slow = app.get(Slow);
    close = () => app.close();
  });
  afterAll(() => close());

  it('rejects the call with LeaseLostError at the loss, not when the method finishes', async () => {
    const started = performance.now();
    const error = await slow.work(uniqueKey('w')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(performance.now() - started).toBeLessThan(1_200);
  });

  it('errors an Observable method\'s stream at the loss', async () => {
    const values: number[] = [];
    const error = await new Promise<unknown>((resolve) => {
      slow.stream(uniqueKey('s')).subscribe({ next: (v) => values.push(v), error: resolve, complete: () => resolve('completed') });
    });
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(values.length).toBeGreaterThan(0);
    expect(values.length).toBeLessThan(30);
  });
});
