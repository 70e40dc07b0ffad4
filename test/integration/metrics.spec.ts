import { metrics } from '@opentelemetry/api';
import { MeterProvider, MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';
import { etcdHosts, redisUrl, sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

/** A pull reader: the test collects whenever it wants to look. */
class TestReader extends MetricReader {
  protected async onForceFlush(): Promise<void> {}
  protected async onShutdown(): Promise<void> {}
}

type Point = DataPoint<unknown>;

async function points(reader: TestReader, name: string): Promise<Point[]> {
  const { resourceMetrics } = await reader.collect();
  const found = resourceMetrics.scopeMetrics
    .filter((s) => s.scope.name === 'nest-distributed-lock')
    .flatMap((s) => s.metrics)
    .find((m) => m.descriptor.name === name);
  return (found?.dataPoints ?? []) as Point[];
}

/** Sum of a counter over the data points whose attributes include `match`. */
async function count(reader: TestReader, name: string, match: Record<string, unknown>): Promise<number> {
  return (await points(reader, name))
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .reduce((sum, p) => sum + (p.value as number), 0);
}

describe('OpenTelemetry metrics (real Redis and etcd, an in-memory metric reader)', () => {
  let reader: TestReader;
  let provider: MeterProvider;
  let app: LockApp;
  const redisLabels = { 'lock.purpose': 'efficiency', 'lock.backend': 'redis' };
  let noSdkListeners = -1;

  beforeAll(async () => {
    // Without an SDK the module must work and record nothing (the API's no-op meter).
    const bare = await startLockApp({ redis: { url: redisUrl() } });
    await bare.locks.using(uniqueKey('no-sdk'), { purpose: 'efficiency' }, () => undefined);
    noSdkListeners = bare.locks.events.listenerCount('acquired') + bare.locks.events.listenerCount('released');
    await bare.close();

    reader = new TestReader();
    provider = new MeterProvider({ readers: [reader] });
    expect(metrics.setGlobalMeterProvider(provider)).toBe(true);
    app = await startLockApp({ redis: { url: redisUrl() }, etcd: { hosts: etcdHosts() } });
  });

  afterAll(async () => {
    await app?.close();
    await provider?.shutdown();
    metrics.disable();
  });

  it('an app without an SDK worked, did not even subscribe to the events, and recorded nothing', async () => {
    expect(noSdkListeners).toBe(0);
    expect(await count(reader, 'distributed_lock.acquired', {})).toBe(0);
  });

  it('counts acquired and released, and records wait and hold times, labelled by purpose and backend but not key', async () => {
    const key = uniqueKey('metrics');
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000 });
    await sleep(30);
    await lease.release();

    expect(await count(reader, 'distributed_lock.acquired', redisLabels)).toBe(1);
    expect(await count(reader, 'distributed_lock.released', { ...redisLabels, 'lock.was_owner': true })).toBe(1);
    const [hold] = await points(reader, 'distributed_lock.hold.duration');
    expect(hold.attributes).toEqual({ ...redisLabels, 'lock.kind': 'lock' }); // no lock.key: unbounded cardinality stays out
    const held = hold.value as { count: number; sum: number };
    expect(held.count).toBe(1);
    expect(held.sum).toBeGreaterThanOrEqual(0.025); // seconds
    const waits = await points(reader, 'distributed_lock.wait.duration');
    expect(waits.find((p) => p.attributes['lock.outcome'] === 'acquired')).toBeDefined();
  });

  it('counts busy when another owner holds the key', async () => {
    const key = uniqueKey('metrics-busy');
    const holder = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000 });
    const before = await count(reader, 'distributed_lock.busy', redisLabels);
    expect(await app.locks.tryAcquire(key, { purpose: 'efficiency' })).toBeNull();
    await expect(app.locks.acquire(key, { purpose: 'efficiency', wait: 50 })).rejects.toThrow(/held by another owner/);
    expect(await count(reader, 'distributed_lock.busy', redisLabels)).toBe(before + 2);
    await holder.release();
  });

  it('counts a lease lost to its ttl, with the reason', async () => {
    const key = uniqueKey('metrics-lost');
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 100 });
    await new Promise((resolve) => lease.signal.addEventListener('abort', resolve));
    expect(await count(reader, 'distributed_lock.lost', { ...redisLabels, 'lock.loss_reason': 'expired' })).toBe(1);
  });

  it('counts forced releases (by whether a holder was there) and the holder\'s loss with its reason', async () => {
    const key = uniqueKey('metrics-forced');
    const lease = await app.locks.acquire(key, { purpose: 'efficiency', ttl: 5_000 });
    expect(await app.locks.forceRelease(key, { purpose: 'efficiency' })).toBe(true);
    expect(await app.locks.forceRelease(key, { purpose: 'efficiency' })).toBe(false);
    expect(lease.signal.aborted).toBe(true);
    expect(await count(reader, 'distributed_lock.force_released', { 'lock.backend': 'redis', 'lock.released': true })).toBe(1);
    expect(await count(reader, 'distributed_lock.force_released', { 'lock.backend': 'redis', 'lock.released': false })).toBe(1);
    expect(await count(reader, 'distributed_lock.lost', { ...redisLabels, 'lock.loss_reason': 'force-released' })).toBe(1);
  });

  it('labels correctness locks on etcd as such', async () => {
    await app.locks.using(uniqueKey('metrics-etcd'), { purpose: 'correctness' }, () => undefined);
    expect(await count(reader, 'distributed_lock.acquired', { 'lock.purpose': 'correctness', 'lock.backend': 'etcd' })).toBe(1);
  });

  it("labels each series with the lease's kind: lock, semaphore, multi-key, leader", async () => {
    const key = uniqueKey('metrics-kind');
    await app.locks.using(key, { purpose: 'efficiency' }, () => undefined);
    await app.locks.using(key, { purpose: 'efficiency', permits: 2 }, () => undefined);
    await app.locks.using([key, `${key}:2`], { purpose: 'efficiency' }, () => undefined);
    await (await app.locks.campaign(key, { purpose: 'efficiency' })).release();
    for (const kind of ['lock', 'semaphore', 'multi-key', 'leader']) {
      expect(await count(reader, 'distributed_lock.acquired', { ...redisLabels, 'lock.kind': kind })).toBeGreaterThanOrEqual(1);
      expect(await count(reader, 'distributed_lock.released', { ...redisLabels, 'lock.kind': kind })).toBeGreaterThanOrEqual(1);
    }
    expect(await count(reader, 'distributed_lock.acquired', { ...redisLabels, 'lock.kind': 'leader' })).toBe(1);
  });

  it('adds the key only with metrics: { includeKey: true }, and metrics: false subscribes to nothing', async () => {
    const keyed = await startLockApp({ redis: { url: redisUrl() }, metrics: { includeKey: true } });
    const off = await startLockApp({ redis: { url: redisUrl() }, metrics: false });
    try {
      const key = uniqueKey('metrics-keyed');
      await keyed.locks.using(key, { purpose: 'efficiency' }, () => undefined);
      expect(await count(reader, 'distributed_lock.acquired', { 'lock.key': key })).toBe(1);
      expect(off.locks.events.listenerCount('acquired')).toBe(0);
      expect(app.locks.events.listenerCount('acquired')).toBe(1);
    } finally {
      await keyed.close();
      await off.close();
    }
  });
});
