import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { DistributedLockHealthIndicator, DistributedLockModule, InvalidLockOptionsError } from '../../lib/index.js';
import { sleep } from '../harness/lock-app.js';
import { EtcdCluster, RedisServer } from '../harness/servers.mjs';

const TIMEOUT_MS = 500;

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly locks: DistributedLockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () => this.locks.pingCheck('redis', { timeout: TIMEOUT_MS }),
      () => this.locks.pingCheck('etcd', { timeout: TIMEOUT_MS }),
    ]);
  }

  @Get('all')
  @HealthCheck()
  all() {
    return this.health.check([() => this.locks.isHealthy({ timeout: TIMEOUT_MS })]);
  }
}

interface Report {
  status: number;
  body: { status: string; info?: Record<string, any>; error?: Record<string, any> };
  ms: number;
}

describe('DistributedLockHealthIndicator with @nestjs/terminus (real Redis and etcd, stopped and restarted)', () => {
  let redis: RedisServer;
  let etcd: EtcdCluster;
  let app: INestApplication;
  let base: string;

  const get = async (path = '/health'): Promise<Report> => {
    const started = performance.now();
    const response = await fetch(base + path);
    return { status: response.status, body: (await response.json()) as Report['body'], ms: performance.now() - started };
  };
  const until = async (predicate: (r: Report) => boolean, timeoutMs: number): Promise<Report> => {
    const deadline = Date.now() + timeoutMs;
    let last = await get();
    while (!predicate(last) && Date.now() < deadline) {
      await sleep(200);
      last = await get();
    }
    return last;
  };

  beforeAll(async () => {
    [redis, etcd] = await Promise.all([RedisServer.start(), EtcdCluster.start({ size: 1 })]);
    @Module({
      imports: [
        TerminusModule.forRoot({ logger: false }),
        DistributedLockModule.forRoot({
          redis: { url: redis.url, connectTimeoutMs: 500, commandTimeoutMs: 500 },
          etcd: { hosts: etcd.hosts, sessionTtlSeconds: 2, commandTimeoutMs: 500 },
        }),
      ],
      controllers: [HealthController],
    })
    class AppModule {}
    app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    base = await app.getUrl();
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await Promise.all([redis?.stop(), etcd?.stop()]);
  });

  it('reports both backends up, with the purposes each serves', async () => {
    const report = await get();
    expect(report.status).toBe(200);
    expect(report.body.status).toBe('ok');
    expect(report.body.info).toMatchObject({
      redis: { status: 'up', backend: 'redis', purposes: ['efficiency'] },
      etcd: { status: 'up', backend: 'etcd', purposes: ['correctness'] },
    });
    const all = await get('/health/all');
    expect(all.status).toBe(200);
    expect(Object.keys(all.body.info!).sort()).toEqual(['etcd', 'redis']);
  });

  it('an unknown backend name or a bad timeout is a programming error (InvalidLockOptionsError), not a "down"', async () => {
    const indicator = app.get(DistributedLockHealthIndicator);
    await expect(indicator.pingCheck('zookeeper')).rejects.toBeInstanceOf(InvalidLockOptionsError);
    await expect(indicator.pingCheck('redis', { timeout: -1 })).rejects.toBeInstanceOf(InvalidLockOptionsError);
  });

  it('reports Redis down within its timeout after kill -9, and up again after a restart', async () => {
    await redis.kill9();
    const down = await get();
    expect(down.status).toBe(503);
    expect(down.body.error).toMatchObject({ redis: { status: 'down', backend: 'redis' } });
    expect(down.body.error!.redis.message).toMatch(/redis/i);
    expect(down.body.info).toMatchObject({ etcd: { status: 'up' } }); // the other backend is not dragged down
    expect(down.ms).toBeLessThan(TIMEOUT_MS * 3); // bounded by the check's timeout, not a hang

    await redis.restart();
    const up = await until((r) => r.status === 200, 10_000);
    expect(up.body.info).toMatchObject({ redis: { status: 'up' }, etcd: { status: 'up' } });
  }, 30_000);

  it('reports etcd down within its timeout when its member is killed, and up again after a restart', async () => {
    const member = etcd.members[0];
    await member.kill9();
    const down = await get();
    expect(down.status).toBe(503);
    expect(down.body.error).toMatchObject({ etcd: { status: 'down', backend: 'etcd' } });
    expect(down.body.info).toMatchObject({ redis: { status: 'up' } });
    expect(down.ms).toBeLessThan(TIMEOUT_MS * 3);

    await member.restart();
    const up = await until((r) => r.status === 200, 20_000);
    expect(up.status).toBe(200);
    expect(up.body.info).toMatchObject({ etcd: { status: 'up' } });
  }, 40_000);
});
