import { Injectable, Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { LazyModuleLoader, NestFactory } from '@nestjs/core';
import {
  DistributedLock,
  DistributedLockModule,
  DistributedLockService,
  InvalidLockOptionsError,
  LockBusyError,
} from '../../lib/index.js';
import { etcdHosts, redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Issue 13, review findings 9 and 10, on real servers: declarations of one method that can never
// both be held are refused at bootstrap; providers of lazily loaded modules are bound when loaded.

async function bootWith(providers: Type[], lockModule: DynamicModule): Promise<INestApplicationContext> {
  @Module({ imports: [lockModule], providers })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
}

/** The bootstrap error, or undefined (and the application closed) when it boots. */
async function refusal(providers: Type[], lockModule: DynamicModule): Promise<unknown> {
  return bootWith(providers, lockModule).then(
    async (app) => {
      await app.close();
      return undefined;
    },
    (e: unknown) => e,
  );
}

/** etcd alone serves both purposes: one backend, one lock per key. */
const etcdOnly = (): DynamicModule => DistributedLockModule.forRoot({ etcd: { hosts: etcdHosts() } });
const redisAndEtcd = (): DynamicModule => DistributedLockModule.forRoot({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } });

describe('@DistributedLock: declarations of one method that can never both be held (finding 10)', () => {
  it('two stacked declarations of one static key for different purposes on one backend are refused at bootstrap, naming the method and the field', async () => {
    const key = uniqueKey('stacked-purpose');
    @Injectable()
    class Ledger {
      @DistributedLock({ purpose: 'correctness', key })
      @DistributedLock({ purpose: 'efficiency', key })
      async post(): Promise<void> {}
    }
    const error = await refusal([Ledger], etcdOnly());
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('purpose');
    expect((error as Error).message).toContain('@DistributedLock on Ledger.post');
    expect((error as Error).message).toContain(key);
  });

  it('two stacked declarations without a key (both default to Class.method) for different purposes are refused too', async () => {
    @Injectable()
    class Ledger {
      @DistributedLock({ purpose: 'efficiency' })
      @DistributedLock({ purpose: 'correctness' })
      async close(): Promise<void> {}
    }
    const error = await refusal([Ledger], etcdOnly());
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('purpose');
    expect((error as Error).message).toContain('Ledger.close');
  });

  it('a decorated override and the decorated base it overrides, one key for different purposes, are refused naming both', async () => {
    const key = uniqueKey('override-purpose');
    @Injectable()
    class Base {
      @DistributedLock({ purpose: 'efficiency', key })
      async sync(): Promise<string> {
        return 'base';
      }
    }
    @Injectable()
    class Sub extends Base {
      @DistributedLock({ purpose: 'correctness', key })
      override async sync(): Promise<string> {
        return super.sync();
      }
    }
    const error = await refusal([Sub], etcdOnly());
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe('purpose');
    expect((error as Error).message).toContain('@DistributedLock on Sub.sync');
    expect((error as Error).message).toContain('Base.sync');
  });

  describe('what still composes', () => {
    let other: LockApp;
    beforeAll(async () => {
      other = await startLockApp({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } });
    });
    afterAll(() => other.close());

    it('two stacked declarations of one key with the same settings: one lock, held while the body runs', async () => {
      const key = uniqueKey('stacked-same');
      @Injectable()
      class Twice {
        constructor(readonly locks: DistributedLockService) {}
        @DistributedLock({ purpose: 'efficiency', key, ttl: 5_000, onBusy: 'throw' })
        @DistributedLock({ purpose: 'efficiency', key, ttl: 5_000, onBusy: 'skip', rejectOnLoss: true })
        async run(): Promise<[string[], boolean]> {
          const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
          await intruder?.release();
          return [this.locks.currentLeases().map((l) => l.key), intruder === null];
        }
      }
      const app = await bootWith([Twice], redisAndEtcd());
      try {
        const [keys, excluded] = await app.get(Twice).run();
        expect(keys).toEqual([key, key]);
        expect(excluded).toBe(true);
      } finally {
        await app.close();
      }
    });

    it('two stacked declarations of one key with different lease settings boot: one lock, the inner a nested acquisition of it', async () => {
      const key = uniqueKey('stacked-settings');
      @Injectable()
      class Reports {
        constructor(readonly locks: DistributedLockService) {}
        @DistributedLock({ purpose: 'efficiency', key, ttl: 5_000 })
        @DistributedLock({ purpose: 'efficiency', key, ttl: 20_000, watchdog: true, maxHold: 60_000, lockAtLeastFor: 100 })
        async build(): Promise<[boolean[], boolean]> {
          const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
          await intruder?.release();
          return [this.locks.currentLeases().map((l) => l.reentrant), intruder === null];
        }
      }
      const app = await bootWith([Reports], redisAndEtcd());
      try {
        const [reentrant, excluded] = await app.get(Reports).build();
        expect(reentrant).toEqual([false, true]);
        expect(excluded).toBe(true);
      } finally {
        await app.close();
      }
    });

    it('one key for two purposes on two backends (Redis and etcd) is two locks: both held', async () => {
      const key = uniqueKey('two-backends');
      @Injectable()
      class Both {
        constructor(readonly locks: DistributedLockService) {}
        @DistributedLock({ purpose: 'correctness', key })
        @DistributedLock({ purpose: 'efficiency', key })
        async run(): Promise<string[]> {
          return this.locks.currentLeases().map((l) => `${l.backend}:${l.purpose}`);
        }
      }
      const app = await bootWith([Both], redisAndEtcd());
      try {
        expect(await app.get(Both).run()).toEqual(['etcd:correctness', 'redis:efficiency']);
      } finally {
        await app.close();
      }
    });
  });

  // Key functions: bootstrap cannot know the key. The call fails (the method never runs) with an
  // error that names the method, not acquire("key").
  it('key functions that meet on one key for different purposes: the call fails naming the method', async () => {
    const key = uniqueKey('dynamic-purpose');
    let ran = false;
    @Injectable()
    class Dynamic {
      @DistributedLock({ purpose: 'correctness', key: (id: string) => id })
      @DistributedLock({ purpose: 'efficiency', key: (id: string) => id })
      async run(_id: string): Promise<void> {
        ran = true;
      }
    }
    const app = await bootWith([Dynamic], etcdOnly());
    try {
      const error = await app.get(Dynamic).run(key).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as InvalidLockOptionsError).field).toBe('purpose');
      expect((error as Error).message).toContain('Dynamic.run');
      expect((error as Error).message).not.toContain('acquire(');
      expect(ran).toBe(false);
    } finally {
      await app.close();
    }
  });
});

describe('@DistributedLock in a lazily loaded module (finding 9)', () => {
  let other: LockApp;
  beforeAll(async () => {
    other = await startLockApp({ redis: { url: redisUrl() } });
  });
  afterAll(() => other.close());

  it('a provider of a module loaded with LazyModuleLoader is bound when it loads: its method runs under its lock', async () => {
    const key = uniqueKey('lazy');
    @Injectable()
    class LazyReports {
      constructor(readonly locks: DistributedLockService) {}
      @DistributedLock({ purpose: 'efficiency', key })
      async build(): Promise<string | undefined> {
        const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
        await intruder?.release();
        return intruder === null ? this.locks.current()?.key : 'unlocked';
      }
    }
    // Value providers whose value is no object (a string, a number, null) sit beside it.
    @Module({ providers: [LazyReports, { provide: 'REPORTS_NAME', useValue: 'reports' }, { provide: 'REPORTS_MAX', useValue: 3 }, { provide: 'REPORTS_NONE', useValue: null }] })
    class LazyReportsModule {}

    // isGlobal: a lazily loaded module cannot import forRoot() itself (a second lock module).
    const app = await bootWith([], DistributedLockModule.forRoot({ redis: { url: redisUrl() }, isGlobal: true }));
    try {
      const moduleRef = await app.get(LazyModuleLoader).load(() => LazyReportsModule);
      const reports = moduleRef.get(LazyReports);
      expect(await reports.build()).toBe(key);
      // A real lock: another owner holding the key makes the call busy.
      const blocker = await other.locks.acquire(key, { purpose: 'efficiency' });
      try {
        await expect(reports.build()).rejects.toBeInstanceOf(LockBusyError);
      } finally {
        await blocker.release();
      }
      // Loading it again (cached by Nest) changes nothing.
      const again = await app.get(LazyModuleLoader).load(() => LazyReportsModule);
      expect(await again.get(LazyReports).build()).toBe(key);
    } finally {
      await app.close();
    }
  });

  it('invalid options in a lazily loaded module fail the load, naming the method and the field; later loads are not affected', async () => {
    let posted = false;
    @Injectable()
    class LazyLedger {
      @DistributedLock({ purpose: 'correctness' })
      async post(): Promise<void> {
        posted = true;
      }
    }
    @Module({ providers: [LazyLedger] })
    class LazyLedgerModule {}
    const key = uniqueKey('lazy-after');
    @Injectable()
    class LazyJob {
      @DistributedLock({ purpose: 'efficiency', key })
      async run(): Promise<boolean> {
        const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
        await intruder?.release();
        return intruder === null;
      }
    }
    @Module({ providers: [LazyJob] })
    class LazyJobModule {}

    const app = await bootWith([], DistributedLockModule.forRoot({ redis: { url: redisUrl() } }));
    try {
      const loader = app.get(LazyModuleLoader);
      const error = await loader.load(() => LazyLedgerModule).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockOptionsError);
      expect((error as InvalidLockOptionsError).field).toBe('purpose');
      expect((error as Error).message).toContain('@DistributedLock on LazyLedger.post');
      // Nest keeps the module (a second load returns it): its provider stays unbound and never runs unlocked.
      const ledgerRef = await loader.load(() => LazyLedgerModule);
      await expect(ledgerRef.get(LazyLedger).post()).rejects.toThrow(/LazyLedger\.post: no lock service/);
      expect(posted).toBe(false);
      // Another module loaded afterwards is explored on its own.
      const moduleRef = await loader.load(() => LazyJobModule);
      expect(await moduleRef.get(LazyJob).run()).toBe(true);
    } finally {
      await app.close();
    }
  });
});
