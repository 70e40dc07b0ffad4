import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import {
  DistributedLockModule,
  DistributedLockService,
  InvalidLockOptionsError,
  LeaseLostError,
  type DistributedLockModuleOptions,
} from '../../lib/index.js';
import { redisUrl, startLockApp, uniqueKey } from '../harness/lock-app.js';

describe('DistributedLockModule lifecycle and configuration', () => {
  let raw: Redis;
  beforeAll(() => {
    raw = new Redis(redisUrl());
  });
  afterAll(() => raw.disconnect());

  it('leaves an application-owned ioredis client connected after app.close()', async () => {
    const client = new Redis(redisUrl());
    const { locks, close } = await startLockApp({ redis: { client } });
    const key = uniqueKey('user-client');
    // Make the backend open its own subscriber connection too (waiting needs it).
    const holder = await locks.acquire(key, { purpose: 'efficiency' });
    const waiter = locks.acquire(key, { purpose: 'efficiency', wait: 2_000 });
    await holder.release();
    await (await waiter).release();
    await close();
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
    client.disconnect();
  });

  it('closes the clients it opened itself on app.close()', async () => {
    const name = `owned-${process.pid}-${Date.now()}`;
    const clientCount = () => clientsNamed(name);
    const before = await clientCount();
    expect(before).toBe(0);
    const { locks, close } = await startLockApp({ redis: { url: redisUrl(), options: { connectionName: name } } });
    const key = uniqueKey('own-client');
    const holder = await locks.acquire(key, { purpose: 'efficiency' });
    const waiter = locks.acquire(key, { purpose: 'efficiency', wait: 2_000 });
    await holder.release();
    await (await waiter).release();
    expect(await clientCount()).toBe(before + 2); // commands + wake-up subscriber
    await close();
    const deadline = Date.now() + 2_000;
    while ((await clientCount()) > before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(await clientCount()).toBe(before);
  });

  it('releases every held lease on shutdown and aborts their signals', async () => {
    const { locks, close } = await startLockApp({ redis: { url: redisUrl() } });
    const key = uniqueKey('shutdown');
    const lease = await locks.acquire(key, { purpose: 'efficiency', ttl: 60_000 });
    expect(await raw.exists(`lock:{${key}}`)).toBe(1);
    await close();
    expect(await raw.exists(`lock:{${key}}`)).toBe(0);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((lease.signal.reason as LeaseLostError).reason).toBe('shutdown');
    await expect(lease.release()).resolves.toBeUndefined();
  });

  it('configures through forRootAsync with an injected factory, and isGlobal exposes the service to other modules', async () => {
    @Injectable()
    class Settings {
      readonly url = redisUrl();
    }
    @Module({ providers: [Settings], exports: [Settings] })
    class SettingsModule {}

    @Injectable()
    class ReportJob {
      constructor(readonly locks: DistributedLockService) {}
    }
    @Module({ providers: [ReportJob] })
    class FeatureModule {}

    @Module({
      imports: [
        DistributedLockModule.forRootAsync({
          isGlobal: true,
          imports: [SettingsModule],
          inject: [Settings],
          useFactory: (settings: Settings) => ({ redis: { url: settings.url, keyPrefix: 'async:' } }),
        }),
        FeatureModule,
      ],
    })
    class AppModule {}

    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    try {
      const job = app.get(ReportJob);
      const key = uniqueKey('async');
      const lease = await job.locks.acquire(key, { purpose: 'efficiency' });
      expect(await raw.exists(`async:{${key}}`)).toBe(1);
      await lease.release();
    } finally {
      await app.close();
    }
  });

  it('accepts plain ioredis options', async () => {
    const { port, hostname } = new URL(redisUrl());
    const { locks, close } = await startLockApp({ redis: { options: { host: hostname, port: Number(port) } } });
    try {
      const lease = await locks.acquire(uniqueKey('options'), { purpose: 'efficiency' });
      await lease.release();
    } finally {
      await close();
    }
  });

  it.each<[string, DistributedLockModuleOptions, string]>([
    ['a non-redis URL', { redis: { url: 'http://127.0.0.1:6379' } }, 'redis.url'],
    ['ttl <= 0', { redis: { url: 'redis://127.0.0.1:1' }, defaults: { ttl: 0 } }, 'defaults.ttl'],
    ['an unknown backend', { redis: { url: 'redis://127.0.0.1:1' }, purposes: { efficiency: 'zookeeper' } }, 'purposes.efficiency'],
    ['correctness on redis', { redis: { url: 'redis://127.0.0.1:1' }, purposes: { correctness: 'redis' } }, 'purposes.correctness'],
  ])('fails at bootstrap on %s, naming the field', async (_case, options, field) => {
    const error = await startLockApp(options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe(field);
    expect((error as Error).message).toContain(`"${field}"`);
  });

  it('refuses bad per-call options before any backend call, naming the field', async () => {
    const { locks, close } = await startLockApp({ redis: { url: redisUrl() } });
    try {
      await expect(locks.acquire('', { purpose: 'efficiency' })).rejects.toThrow(/"key".*must not be empty/);
      await expect(locks.acquire('k', { purpose: 'efficiency', ttl: 0 })).rejects.toThrow(/"ttl"/);
      await expect(locks.acquire('k', { purpose: 'efficiency', backend: 'zookeeper' })).rejects.toThrow(/"backend".*unknown backend/);
      await expect(locks.acquire('k', { purpose: 'correctness' })).rejects.toThrow(/"purpose".*fencing tokens/);
      await expect(locks.acquire('k', {} as never)).rejects.toBeInstanceOf(InvalidLockOptionsError);
    } finally {
      await close();
    }
  });
});

/** Connections open on the test Redis under one client name (other suites may run alongside). */
async function clientsNamed(name: string): Promise<number> {
  const probe = new Redis(redisUrl());
  try {
    const list = (await probe.client('LIST')) as string;
    return list.split('\n').filter((line) => line.includes(` name=${name} `)).length;
  } finally {
    probe.disconnect();
  }
}
