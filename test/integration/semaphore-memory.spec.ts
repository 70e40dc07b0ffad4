import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLock, DistributedLockModule, DistributedLockService, InvalidLockOptionsError, MemoryBackend } from '../../lib/index.js';
import { describeSemaphore } from '../harness/semaphore-contract.js';
import { RedisServer } from '../harness/servers.mjs';
import { startLockApp } from '../harness/lock-app.js';

// The contract on the in-memory backend: three applications share one MemoryBackend instance.
describeSemaphore({
  backend: 'shared',
  purpose: 'correctness',
  fencing: true,
  server: async () => ({ options: { backends: { shared: new MemoryBackend('shared') } }, stop: async () => undefined }),
});

describe('permits: bad input fails closed, naming the field', () => {
  it.each([0, -1, 1.5, 10_001, Number.NaN, Number.POSITIVE_INFINITY, '2', 2n])('refuses permits %p before any backend call', async (permits) => {
    const app = await startLockApp({ memory: {} });
    try {
      await expect(app.locks.acquire('k', { purpose: 'efficiency', permits } as never)).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'permits' });
      expect(await app.locks.inspect('k', { purpose: 'efficiency' })).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('refuses permits > 1 on a backend without semaphores (Redlock), at the call and at bootstrap', async () => {
    const masters = await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()]);
    try {
      const app = await startLockApp({ redlock: { urls: masters.map((m) => m.url) } });
      try {
        await expect(app.locks.acquire('k', { purpose: 'efficiency', permits: 2 })).rejects.toThrow(/backend "redlock" does not serve semaphores \(permits > 1\): configure one that does \(redis, etcd, zookeeper, postgres, mysql, memory\), or use permits: 1/);
        // permits: 1 is a plain lock, served everywhere.
        await (await app.locks.acquire('k', { purpose: 'efficiency', permits: 1 })).release();
      } finally {
        await app.close();
      }
      @Injectable()
      class Jobs {
        @DistributedLock({ purpose: 'efficiency', permits: 3 })
        async work(): Promise<void> {}
      }
      @Module({ imports: [DistributedLockModule.forRoot({ redlock: { urls: masters.map((m) => m.url) } })], providers: [Jobs] })
      class AppModule {}
      await expect(NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })).rejects.toThrow(
        /"permits" in @DistributedLock on Jobs\.work: backend "redlock" does not serve semaphores/,
      );
    } finally {
      await Promise.all(masters.map((m) => m.stop()));
    }
  }, 30_000);

  it('refuses two stacked declarations of one key with different permits at bootstrap', async () => {
    @Injectable()
    class Jobs {
      @DistributedLock({ purpose: 'efficiency', key: 'pool', permits: 2 })
      @DistributedLock({ purpose: 'efficiency', key: 'pool', permits: 3 })
      async work(): Promise<void> {}
    }
    @Module({ imports: [DistributedLockModule.forRoot({ memory: {} })], providers: [Jobs] })
    class AppModule {}
    await expect(NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })).rejects.toMatchObject({
      constructor: InvalidLockOptionsError,
      field: 'permits',
    });
  });
});

describe('@DistributedLock({ permits })', () => {
  it('runs at most `permits` calls of a method at once; a nested acquisition with other permits is refused', async () => {
    let running = 0;
    let most = 0;
    @Injectable()
    class Renderer {
      constructor(readonly locks: DistributedLockService) {}
      @DistributedLock({ purpose: 'efficiency', key: 'renderers', permits: 2, wait: 5_000 })
      async render(): Promise<void> {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 30));
        running--;
      }
      @DistributedLock({ purpose: 'efficiency', key: 'renderers', permits: 2 })
      async nestedOther(): Promise<void> {
        await this.locks.using('renderers', { purpose: 'efficiency', permits: 3 }, () => undefined);
      }
    }
    @Module({ imports: [DistributedLockModule.forRoot({ memory: {} })], providers: [Renderer] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const renderer = app.get(Renderer);
      await Promise.all(Array.from({ length: 7 }, () => renderer.render()));
      expect(most).toBe(2);
      await expect(renderer.nestedOther()).rejects.toMatchObject({ field: 'permits' });
    } finally {
      await app.close();
    }
  });
});
