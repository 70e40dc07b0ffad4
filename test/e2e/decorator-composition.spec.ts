import { Injectable, Module, type DynamicModule, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { defer, lastValueFrom, Observable, of, repeat, retry, tap, throwError } from 'rxjs';
import { DistributedLock, DistributedLockError, DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { redisUrl, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Real applications on a real Redis: what the decorator does when declarations compose.

async function bootWith(providers: Type[], lockModules: DynamicModule[] = [DistributedLockModule.forRoot({ redis: { url: redisUrl() } })]): Promise<INestApplicationContext> {
  @Module({ imports: lockModules, providers })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
}

const keyA = uniqueKey('stacked-a');
const keyB = uniqueKey('stacked-b');
const keyBase = uniqueKey('base');
const keySub = uniqueKey('sub');

@Injectable()
class Stacked {
  constructor(readonly locks: DistributedLockService) {}
  @DistributedLock({ purpose: 'efficiency', key: keyA })
  @DistributedLock({ purpose: 'efficiency', key: keyB })
  async run(): Promise<string[]> {
    return this.locks.currentLeases().map((lease) => lease.key);
  }
}

@Injectable()
class Base {
  constructor(readonly locks: DistributedLockService) {}
  @DistributedLock({ purpose: 'efficiency', key: keyBase })
  async run(): Promise<string[]> {
    return this.locks.currentLeases().map((lease) => lease.key);
  }
}

@Injectable()
class Sub extends Base {
  @DistributedLock({ purpose: 'efficiency', key: keySub })
  override async run(): Promise<string[]> {
    return super.run();
  }
}

describe('@DistributedLock under composition (Redis)', () => {
  let other: LockApp;
  beforeAll(async () => {
    other = await startLockApp({ redis: { url: redisUrl() } });
  });
  afterAll(async () => {
    await other.close();
  });

  it('two stacked declarations hold both locks while the body runs', async () => {
    const app = await bootWith([Stacked]);
    try {
      const held = await app.get(Stacked).run();
      expect(held.sort()).toEqual([keyA, keyB].sort());
    } finally {
      await app.close();
    }
  });

  it('a decorated override calling a decorated super holds both keys in the base body', async () => {
    const app = await bootWith([Sub]);
    try {
      const held = await app.get(Sub).run();
      expect(held).toEqual([keySub, keyBase]);
    } finally {
      await app.close();
    }
  });

  it('an undecorated override of a decorated method is refused at bootstrap, naming both', async () => {
    @Injectable()
    class Plain extends Base {
      override async run(): Promise<string[]> {
        return ['unlocked'];
      }
    }
    const error = await bootWith([Plain]).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DistributedLockError);
    expect((error as Error).message).toMatch(/Plain\.run/);
    expect((error as Error).message).toMatch(/Base\.run/);
  });

  it('a decorated static method is refused', () => {
    expect(() => {
      class Jobs {
        @DistributedLock({ purpose: 'efficiency' })
        static async nightly(): Promise<void> {}
      }
      return Jobs;
    }).toThrow(DistributedLockError);
  });

  it('two forRoot() in one application are refused at bootstrap with a clear error', async () => {
    @Injectable()
    class Job {
      @DistributedLock({ purpose: 'efficiency' })
      async run(): Promise<void> {}
    }
    const error = await bootWith(
      [Job],
      [DistributedLockModule.forRoot({ redis: { url: redisUrl() } }), DistributedLockModule.forRoot({ redis: { url: redisUrl(), keyPrefix: 'other:' } })],
    ).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DistributedLockError);
    expect((error as Error).message).toMatch(/forRoot/);
  });

  it('an undeclared Observable return: every subscription (retry) runs under the lock', async () => {
    const key = uniqueKey('observable');
    const attempts: Array<boolean> = [];
    @Injectable()
    class Feed {
      // No declared return type: the decorator learns of the Observable only from the value.
      @DistributedLock({ purpose: 'efficiency', key, wait: 2_000 })
      async stream() {
        return defer(async () => {
          const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
          attempts.push(intruder === null);
          await intruder?.release();
          if (attempts.length < 3) throw new Error('transient');
          return 'done';
        });
      }
    }
    const app = await bootWith([Feed]);
    try {
      const source = (await app.get(Feed).stream()) as unknown as Observable<string>;
      expect(await lastValueFrom(source.pipe(retry(2)))).toBe('done');
      expect(attempts).toEqual([true, true, true]);
    } finally {
      await app.close();
    }
  });
});

void of;
void tap;
void throwError;

describe('@DistributedLock under composition, after review', () => {
  let other: LockApp;
  beforeAll(async () => {
    other = await startLockApp({ redis: { url: redisUrl() } });
  });
  afterAll(async () => {
    await other.close();
  });

  it('a declared Observable re-subscribed with repeat(3) takes its own lock each time (no LockBusyError from its own release)', async () => {
    const key = uniqueKey('repeat');
    let runs = 0;
    @Injectable()
    class Ticker {
      @DistributedLock({ purpose: 'efficiency', key })
      tick(): Observable<number> {
        return defer(async () => ++runs);
      }
    }
    const app = await bootWith([Ticker]);
    try {
      const values: number[] = [];
      await lastValueFrom(app.get(Ticker).tick().pipe(repeat(3), tap((v) => values.push(v))));
      expect(values).toEqual([1, 2, 3]);
    } finally {
      await app.close();
    }
  });

  it('stacked declarations: when the outer lock runs out while the inner one waits, the body never starts', async () => {
    const outerKey = uniqueKey('outer');
    const innerKey = uniqueKey('inner');
    let ran = false;
    @Injectable()
    class Job {
      @DistributedLock({ purpose: 'efficiency', key: outerKey, ttl: 300 })
      @DistributedLock({ purpose: 'efficiency', key: innerKey, wait: 3_000 })
      async run(): Promise<void> {
        ran = true;
      }
    }
    const app = await bootWith([Job]);
    const blocker = await other.locks.acquire(innerKey, { purpose: 'efficiency', ttl: 10_000 });
    try {
      const outcome = await app.get(Job).run().catch((e: unknown) => e);
      expect(outcome).toBeInstanceOf(DistributedLockError);
      expect(ran).toBe(false);
    } finally {
      await blocker.release();
      await app.close();
    }
  });

  it('a decorated listener called synchronously from a locked method, with its key, keeps the lock until it is done', async () => {
    const key = uniqueKey('order');
    const seen: Array<boolean> = [];
    let listenerDone!: Promise<void>;
    @Injectable()
    class Orders {
      @DistributedLock({ purpose: 'efficiency', key })
      async place(): Promise<void> {
        listenerDone = this.onPlaced(); // an event emitter calls its listeners like this
      }
      @DistributedLock({ purpose: 'efficiency', key, wait: 5_000 })
      async onPlaced(): Promise<void> {
        for (let i = 0; i < 3; i++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
          seen.push(intruder === null);
          await intruder?.release();
        }
      }
    }
    const app = await bootWith([Orders]);
    try {
      await app.get(Orders).place();
      await listenerDone;
      expect(seen).toEqual([true, true, true]);
      const after = await other.locks.acquire(key, { purpose: 'efficiency', wait: 2_000 });
      await after.release();
    } finally {
      await app.close();
    }
  });
});

describe('@DistributedLock: overrides that are not plain methods, and one instance in two applications', () => {
  const refusal = async (providers: Parameters<typeof bootWith>[0]): Promise<unknown> =>
    bootWith(providers).then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: unknown) => e,
    );

  it('an autobind-style getter over a decorated method is refused at bootstrap', async () => {
    @Injectable()
    class Bound extends Base {}
    Object.defineProperty(Bound.prototype, 'run', {
      configurable: true,
      get(this: Base) {
        return async () => ['unlocked'];
      },
    });
    const error = await refusal([Bound]);
    expect(error).toBeInstanceOf(DistributedLockError);
    expect((error as Error).message).toMatch(/Base\.run/);
  });

  it('an own property set in the constructor that hides a decorated method is refused at bootstrap', async () => {
    @Injectable()
    class Shadowed extends Base {
      constructor(locks: DistributedLockService) {
        super(locks);
        (this as unknown as { run: () => Promise<string[]> }).run = async () => ['unlocked'];
      }
    }
    const error = await refusal([Shadowed]);
    expect(error).toBeInstanceOf(DistributedLockError);
    expect((error as Error).message).toMatch(/own property/);
  });

  it('the same object provided to two running applications is refused by the second', async () => {
    const shared = new Base(undefined as unknown as DistributedLockService);
    @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() } })], providers: [{ provide: Base, useValue: shared }] })
    class First {}
    @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl(), keyPrefix: 'second:' } })], providers: [{ provide: Base, useValue: shared }] })
    class Second {}
    const first = await NestFactory.createApplicationContext(First, { logger: false, abortOnError: false });
    try {
      const error = await NestFactory.createApplicationContext(Second, { logger: false, abortOnError: false }).then(
        async (app) => {
          await app.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(DistributedLockError);
      expect((error as Error).message).toMatch(/another application/);
    } finally {
      await first.close();
    }
    // Once the first application is closed, another may serve it.
    const third = await NestFactory.createApplicationContext(Second, { logger: false, abortOnError: false });
    await third.close();
  });
});
