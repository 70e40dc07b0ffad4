import { Injectable, Module, type INestApplicationContext, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { defer, lastValueFrom, Observable, of, repeat, toArray } from 'rxjs';
import { DistributedLock, DistributedLockService } from '../../lib/index.js';
import { DistributedLockTestingModule } from '../../lib/testing/index.js';

// A subscription of a locked Observable is one locked call: a re-subscription made as the previous
// one ends — by repeat() over a source that completes on subscribe, or from a complete callback —
// runs inside the ending work's async context, and must take a fresh lease, never re-enter the
// ending one (which would share its token and validity, and hold the key until the last one closed).
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function boot(providers: Type[]): Promise<INestApplicationContext> {
  @Module({ imports: [DistributedLockTestingModule.forRoot()], providers })
  class AppModule {}
  return NestFactory.createApplicationContext(AppModule, { logger: false });
}

const seen: boolean[] = [];
@Injectable()
class Feed {
  constructor(readonly locks: DistributedLockService) {}
  @DistributedLock({ purpose: 'efficiency', key: 'sync-feed', ttl: 5_000 })
  syncTick(): Observable<number> {
    // Completes synchronously on subscribe (of(), a cache hit, an empty result).
    return defer(() => {
      seen.push(this.locks.current('sync-feed')!.reentrant);
      return of(seen.length);
    });
  }
  @DistributedLock({ purpose: 'efficiency', key: 'async-feed', ttl: 5_000 })
  asyncTick(): Observable<number> {
    return new Observable<number>((s) => {
      void sleep(10).then(() => {
        seen.push(this.locks.current('async-feed')!.reentrant);
        s.next(seen.length);
        s.complete();
      });
    });
  }
}

describe('@DistributedLock Observables: a re-subscription as the previous one ends takes a fresh lease', () => {
  beforeEach(() => void seen.splice(0));

  it('repeat() over a declared Observable that completes synchronously takes a fresh lease each time', async () => {
    const app = await boot([Feed]);
    const acquired: boolean[] = [];
    app.get(DistributedLockService).events.on('acquired', (e) => acquired.push(e.reentrant));
    try {
      expect(await lastValueFrom(app.get(Feed).syncTick().pipe(repeat(3), toArray()))).toEqual([1, 2, 3]);
      expect(seen).toEqual([false, false, false]);
      expect(acquired).toEqual([false, false, false]);
    } finally {
      await app.close();
    }
  });

  it('subscribing again from the complete callback takes a fresh lease, not the one that just ended', async () => {
    const app = await boot([Feed]);
    try {
      const feed = app.get(Feed);
      await new Promise<void>((done) => {
        feed.asyncTick().subscribe({ complete: () => feed.asyncTick().subscribe({ complete: () => done() }) });
      });
      expect(seen).toEqual([false, false]);
    } finally {
      await app.close();
    }
  });
});
