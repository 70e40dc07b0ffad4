import { Injectable, Module, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { defer, lastValueFrom, Observable, repeat, toArray, type Subscription } from 'rxjs';
import { DistributedLock, DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { redisUrl, sleep, startLockApp, uniqueKey, until, untilQueued, type LockApp } from '../harness/lock-app.js';

// Observables returned by decorated methods, against a real Redis: what an unsubscription or a
// subscription that never comes does to the lock.

async function bootWith(providers: Type[]): Promise<INestApplicationContext> {
  @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() } })], providers })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: false });
}

describe('@DistributedLock and Observables: unsubscribed and never-subscribed calls hold nothing', () => {
  let other: LockApp;
  beforeAll(async () => {
    other = await startLockApp({ redis: { url: redisUrl() } });
  });
  afterAll(async () => {
    await other.close();
  });

  it('a declared Observable unsubscribed while it waits for the lock stops waiting: it never takes the lock, its body never runs', async () => {
    const key = uniqueKey('unsubscribed-wait');
    let ran = false;
    @Injectable()
    class Feed {
      @DistributedLock({ purpose: 'efficiency', key, wait: 5_000 })
      watch(): Observable<string> {
        return defer(async () => {
          ran = true;
          return 'ran';
        });
      }
    }
    const app = await bootWith([Feed]);
    const holder = await other.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
    const acquired: string[] = [];
    app.get(DistributedLockService).events.on('acquired', (e) => acquired.push(e.key));
    try {
      const subscription: Subscription = app.get(Feed).watch().subscribe({ error: () => undefined });
      // Queued behind the holder before it unsubscribes.
      await untilQueued(other.locks, key, { purpose: 'efficiency' }, 1);
      subscription.unsubscribe();
      await holder.release();
      // Had it kept waiting, it would be handed the lock now (FIFO) and hold it for a moment.
      await sleep(500);
      expect(acquired).toEqual([]);
      expect(ran).toBe(false);
      const next = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
      expect(next).not.toBeNull();
      await next?.release();
    } finally {
      await app.close();
    }
  });

  it('an undeclared Observable that is never subscribed does not keep the key until its ttl', async () => {
    const key = uniqueKey('never-subscribed');
    @Injectable()
    class Feed {
      // No declared return type: the decorator learns of the Observable only from the value.
      @DistributedLock({ purpose: 'efficiency', key, ttl: 30_000 })
      async load() {
        return defer(async () => 'loaded');
      }
    }
    const app = await bootWith([Feed]);
    try {
      const source = (await app.get(Feed).load()) as unknown as Observable<string>;
      // Nobody subscribes (yet): another replica may take the key.
      const intruder = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
      expect(intruder).not.toBeNull();
      // A later subscription takes the lock itself: busy while the other replica holds it…
      await expect(lastValueFrom(source)).rejects.toMatchObject({ name: 'LockBusyError' });
      await intruder?.release();
      // …and runs under it once free.
      expect(await lastValueFrom(source)).toBe('loaded');
    } finally {
      await app.close();
    }
  });

  it('an undeclared Observable unsubscribed while a later subscription waits stops waiting', async () => {
    const key = uniqueKey('undeclared-unsubscribed');
    let runs = 0;
    @Injectable()
    class Feed {
      @DistributedLock({ purpose: 'efficiency', key, wait: 5_000 })
      async load() {
        return defer(async () => ++runs);
      }
    }
    const app = await bootWith([Feed]);
    const acquired: string[] = [];
    try {
      const source = (await app.get(Feed).load()) as unknown as Observable<number>;
      const holder = await other.locks.acquire(key, { purpose: 'efficiency', ttl: 10_000 });
      app.get(DistributedLockService).events.on('acquired', (e) => acquired.push(e.key));
      const subscription = source.subscribe({ error: () => undefined });
      // Queued behind the holder before it unsubscribes.
      await untilQueued(other.locks, key, { purpose: 'efficiency' }, 1);
      subscription.unsubscribe();
      await holder.release();
      await sleep(500);
      expect(acquired).toEqual([]);
      expect(runs).toBe(0);
    } finally {
      await app.close();
    }
  });
  it('a declared Observable re-subscribed by repeat() from inside its own work takes a fresh lease each time, never the ending one', async () => {
    const key = uniqueKey('repeat-fresh');
    const seen: Array<{ reentrant: boolean; remaining: number }> = [];
    @Injectable()
    class Feed {
      constructor(readonly locks: DistributedLockService) {}
      @DistributedLock({ purpose: 'efficiency', key, ttl: 10_000 })
      tick(): Observable<number> {
        return new Observable<number>((subscriber) => {
          // Completes from a continuation of work begun under the lease (its async context), so
          // repeat() subscribes again synchronously, still inside that context.
          void sleep(20).then(() => {
            const lease = this.locks.current(key)!;
            seen.push({ reentrant: lease.reentrant, remaining: lease.remainingMs() });
            subscriber.next(seen.length);
            subscriber.complete();
          });
        });
      }
    }
    const app = await bootWith([Feed]);
    const released: boolean[] = [];
    app.get(DistributedLockService).events.on('released', (e) => released.push(e.wasOwner));
    try {
      expect(await lastValueFrom(app.get(Feed).tick().pipe(repeat(3), toArray()))).toEqual([1, 2, 3]);
      // Each subscription held a lease of its own (the previous one had ended): none re-entered.
      expect(seen.map((s) => s.reentrant)).toEqual([false, false, false]);
      // Each lease's release has answered (its 'released' event).
      await until(() => released.length >= 3, 10_000, 'three releases');
      expect(released).toEqual([true, true, true]);
      const next = await other.locks.tryAcquire(key, { purpose: 'efficiency' });
      expect(next).not.toBeNull();
      await next?.release();
    } finally {
      await app.close();
    }
  });
});
