import { Controller, Get, Module, NotFoundException, Param, Post, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { interval, map, take, toArray, type Observable } from 'rxjs';
import { DistributedLock, DistributedLockModule, DistributedLockService } from '../../lib/index.js';
import { etcdHosts, redisUrl, sleep, uniqueKey, until } from '../harness/lock-app.js';

/** Shared by both application instances (one process): who is inside a critical section. */
const probe = { inside: 0, max: 0, enter(): void { this.inside += 1; this.max = Math.max(this.max, this.inside); }, leave(): void { this.inside -= 1; } };

@Controller('orders')
class OrdersController {
  constructor(private readonly locks: DistributedLockService) {}

  @Post(':id/charge')
  @DistributedLock({ purpose: 'correctness', key: (id: string) => `order:${id}`, ttl: 10_000 })
  async charge(@Param('id') _id: string): Promise<{ token: string }> {
    probe.enter();
    const token = this.locks.current()!.token!;
    await sleep(150);
    probe.leave();
    return { token: token.toString() };
  }

  @DistributedLock({ purpose: 'efficiency', key: (id: string) => `report:${id}`, ttl: 10_000 })
  @Post(':id/report')
  async report(@Param('id') _id: string): Promise<{ ok: true }> {
    probe.enter();
    await sleep(150);
    probe.leave();
    return { ok: true };
  }

  @Post(':id/queue')
  @DistributedLock({ purpose: 'efficiency', key: (id: string) => `queue:${id}`, wait: 10_000 })
  async queue(@Param('id') _id: string): Promise<{ ok: true }> {
    probe.enter();
    await sleep(40);
    probe.leave();
    return { ok: true };
  }

  @Get(':id')
  @DistributedLock({ purpose: 'efficiency', key: (id: string) => `find:${id}` })
  find(@Param('id') id: string): never {
    throw new NotFoundException(`order ${id} does not exist`);
  }

  @Get(':id/stream')
  @DistributedLock({ purpose: 'efficiency', key: (id: string) => `stream:${id}` })
  stream(@Param('id') _id: string): Observable<number[]> {
    return interval(100).pipe(take(4), toArray(), map((values) => values));
  }
}

@Module({
  imports: [DistributedLockModule.forRoot({ redis: { url: process.env.TEST_REDIS_URL! }, etcd: { hosts: process.env.TEST_ETCD_HOSTS!.split(',') } })],
  controllers: [OrdersController],
})
class AppModule {}

describe.each([
  ['Express', () => new ExpressAdapter()],
  ['Fastify', () => new FastifyAdapter()],
] as const)('@DistributedLock on HTTP handlers (%s)', (_platform, adapter) => {
  let apps: INestApplication[];
  let urls: string[];

  beforeAll(async () => {
    redisUrl();
    etcdHosts();
    apps = [];
    for (let i = 0; i < 2; i++) {
      const app = await NestFactory.create(AppModule, adapter(), { logger: false });
      await app.listen(0, '127.0.0.1');
      apps.push(app);
    }
    urls = await Promise.all(apps.map((app) => app.getUrl()));
  });
  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
  });
  beforeEach(() => {
    probe.inside = 0;
    probe.max = 0;
  });

  const post = (n: number, path: string): Promise<Response> => fetch(`${urls[n % 2]}${path}`, { method: 'POST' });

  it('concurrent requests to two instances: one runs at a time, the others get 409 with a clear body', async () => {
    const id = uniqueKey('order');
    const responses = await Promise.all([0, 1, 2, 3, 4, 5].map((n) => post(n, `/orders/${id}/charge`)));
    const statuses = responses.map((r) => r.status);
    expect(probe.max).toBe(1);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThanOrEqual(1);
    expect(statuses.filter((s) => s === 409).length).toBeGreaterThanOrEqual(1);
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    const conflict = (await responses[statuses.indexOf(409)].json()) as { message: string };
    expect(conflict).toMatchObject({ statusCode: 409, error: 'Conflict', key: `order:${id}` });
    expect(conflict.message).toContain('held by another owner');
  });

  it('says when to retry (Retry-After) when the holder\'s lease end is known (Redis)', async () => {
    const id = uniqueKey('report');
    const responses = await Promise.all([0, 1, 2, 3].map((n) => post(n, `/orders/${id}/report`)));
    const conflict = responses.find((r) => r.status === 409)!;
    expect(conflict).toBeDefined();
    expect(Number(conflict.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(conflict.headers.get('retry-after'))).toBeLessThanOrEqual(10);
    expect(probe.max).toBe(1);
  });

  it('with onBusy wait, every request runs, one after the other', async () => {
    const id = uniqueKey('queue');
    const responses = await Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map((n) => post(n, `/orders/${id}/queue`)));
    expect(responses.map((r) => r.status)).toEqual(new Array(8).fill(201));
    expect(probe.max).toBe(1);
  });

  it('successive holders see increasing fencing tokens through current()', async () => {
    const id = uniqueKey('tokens');
    const tokens: bigint[] = [];
    for (let n = 0; n < 4; n++) tokens.push(BigInt(((await (await post(n, `/orders/${id}/charge`)).json()) as { token: string }).token));
    for (let i = 1; i < tokens.length; i++) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]);
  });

  it('passes the handler\'s own HttpException through: 404 stays 404', async () => {
    const response = await fetch(`${urls[0]}/orders/nope-${uniqueKey('x')}`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { message: string }).message).toMatch(/does not exist/);
  });

  it('holds the lock until the handler\'s Observable completes', async () => {
    const id = uniqueKey('stream');
    const locks = apps[1].get(DistributedLockService);
    const pending = fetch(`${urls[0]}/orders/${id}/stream`);
    // The request has reached the handler and its Observable runs under the lock (~400 ms).
    await until(async () => (await locks.inspect(`stream:${id}`, { purpose: 'efficiency' })) !== null, 10_000, 'the stream holding its key');
    expect(await locks.tryAcquire(`stream:${id}`, { purpose: 'efficiency' })).toBeNull();
    const response = await pending;
    expect(await response.json()).toEqual([0, 1, 2, 3]);
    const after = await locks.tryAcquire(`stream:${id}`, { purpose: 'efficiency' });
    expect(after).not.toBeNull();
    await after!.release();
  });
});
