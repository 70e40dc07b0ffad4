import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { DistributedLock, DistributedLockModule, InvalidLockOptionsError, MemoryBackend } from '../../lib/index.js';
import { describeReadWrite } from '../harness/read-write-contract.js';
import { RedisServer } from '../harness/servers.mjs';
import { startLockApp } from '../harness/lock-app.js';

// The contract on the in-memory backend: three applications share one MemoryBackend instance.
describeReadWrite({
  backend: 'shared',
  purpose: 'correctness',
  fencing: true,
  server: async () => ({ options: { backends: { shared: new MemoryBackend('shared') } }, stop: async () => undefined }),
});

describe('mode: bad input fails closed, naming the field', () => {
  it.each(['READ', 'shared', '', null, 1, true])('refuses mode %p before any backend call', async (mode) => {
    const app = await startLockApp({ memory: {} });
    try {
      await expect(app.locks.acquire('k', { purpose: 'efficiency', mode } as never)).rejects.toMatchObject({ constructor: InvalidLockOptionsError, field: 'mode' });
      expect(await app.locks.inspect('k', { purpose: 'efficiency' })).toBeNull();
    } finally {
      await app.close();
    }
  });

  it('refuses a mode with permits > 1, and an upgradeable read of several keys', async () => {
    const app = await startLockApp({ memory: {} });
    try {
      await expect(app.locks.acquire('k', { purpose: 'efficiency', mode: 'read', permits: 2 })).rejects.toThrow(/semaphore \(permits 2\) has no read and write modes/);
      await expect(app.locks.acquire(['a', 'b'], { purpose: 'efficiency', mode: 'upgradeable' })).rejects.toMatchObject({ field: 'mode' });
      // 'write' is the plain lock, with permits as before.
      await (await app.locks.acquire('k', { purpose: 'efficiency', mode: 'write' })).release();
    } finally {
      await app.close();
    }
  });

  it('refuses read modes on a backend without read-write locks (Redlock), at the call and at bootstrap', async () => {
    const masters = await Promise.all([RedisServer.start(), RedisServer.start(), RedisServer.start()]);
    try {
      const app = await startLockApp({ redlock: { urls: masters.map((m) => m.url) } });
      try {
        await expect(app.locks.acquire('k', { purpose: 'efficiency', mode: 'read' })).rejects.toThrow(/backend "redlock" does not serve read-write locks \(mode 'read'\): configure one that does \(.*memory.*\), or use mode 'write'/);
        await (await app.locks.acquire('k', { purpose: 'efficiency', mode: 'write' })).release();
      } finally {
        await app.close();
      }
      @Injectable()
      class Jobs {
        @DistributedLock({ purpose: 'efficiency', mode: 'upgradeable' })
        async run(): Promise<void> {}
      }
      @Module({ imports: [DistributedLockModule.forRoot({ redlock: { urls: masters.map((m) => m.url) } })], providers: [Jobs] })
      class AppModule {}
      await expect(NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false })).rejects.toMatchObject({
        constructor: InvalidLockOptionsError,
        field: 'mode',
        message: expect.stringContaining('Jobs.run'),
      });
    } finally {
      await Promise.all(masters.map((m) => m.stop()));
    }
  });

  it('a decorated reader and a decorated writer of one key: readers run together, the writer alone', async () => {
    const backend = new MemoryBackend('rw');
    const running = { readers: 0, writers: 0, maxReaders: 0, overlap: false };
    @Injectable()
    class Config {
      @DistributedLock({ purpose: 'correctness', backend: 'rw', key: 'config', mode: 'read', onBusy: 'wait', wait: 10_000 })
      async read(): Promise<void> {
        running.readers++;
        running.maxReaders = Math.max(running.maxReaders, running.readers);
        if (running.writers > 0) running.overlap = true;
        await new Promise((resolve) => setTimeout(resolve, 50));
        running.readers--;
      }

      @DistributedLock({ purpose: 'correctness', backend: 'rw', key: 'config', onBusy: 'wait', wait: 10_000 })
      async write(): Promise<void> {
        running.writers++;
        if (running.readers > 0 || running.writers > 1) running.overlap = true;
        await new Promise((resolve) => setTimeout(resolve, 20));
        running.writers--;
      }
    }
    @Module({ imports: [DistributedLockModule.forRoot({ backends: { rw: backend }, purposes: { correctness: 'rw' } })], providers: [Config] })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const config = app.get(Config);
      await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 5 === 4 ? config.write() : config.read())));
      expect(running.overlap).toBe(false);
      expect(running.maxReaders).toBeGreaterThan(1);
    } finally {
      await app.close();
    }
  });
});
