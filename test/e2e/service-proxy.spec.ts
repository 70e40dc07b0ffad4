import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLockService } from '../../lib/index.js';
import { DistributedLockTestingModule } from '../../lib/testing/index.js';

// The service seen through a Proxy (tracing/instrumentation wrappers, Object.create-based stubs):
// its state is in ordinary (TS-private) fields, so every public method works with `this` being
// the proxy (#private fields would throw "Cannot read private member").
describe('DistributedLockService used through a wrapper', () => {
  it('using(), acquire(), current() work when called on a Proxy of the service', async () => {
    @Module({ imports: [DistributedLockTestingModule.forRoot()] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const locks = app.get(DistributedLockService);
      const calls: string[] = [];
      const traced = new Proxy(locks, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (typeof value === 'function') calls.push(String(prop));
          return value;
        },
      });
      const inside = await traced.using('proxy-key', { purpose: 'efficiency', ttl: 5_000 }, () => traced.current('proxy-key')?.key);
      expect(inside).toBe('proxy-key');
      const lease = await traced.acquire('proxy-key-2', { purpose: 'efficiency', ttl: 5_000 });
      await lease.release();
      expect(await traced.tryAcquire('proxy-key-2', { purpose: 'efficiency', ttl: 5_000 }).then((l) => l?.release().then(() => true))).toBe(true);
      expect(calls).toEqual(expect.arrayContaining(['using', 'current', 'acquire', 'tryAcquire']));
    } finally {
      await app.close();
    }
  });

  it('a method called on an object inheriting from the service (Object.create) works', async () => {
    @Module({ imports: [DistributedLockTestingModule.forRoot()] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const locks = app.get(DistributedLockService);
      const derived = Object.create(locks) as DistributedLockService;
      expect(await derived.using('derived-key', { purpose: 'efficiency', ttl: 5_000 }, () => 'ran')).toBe('ran');
    } finally {
      await app.close();
    }
  });
});
