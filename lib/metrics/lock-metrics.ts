import { Inject, Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { LOGGER_CONTEXT, RESOLVED_LOCK_OPTIONS } from '../distributed-lock.constants.js';
import type { LockEventMap, LockEventName } from '../engine/lock-events.js';
import { LockEngine } from '../engine/lock-engine.js';
import { LeaseLostError } from '../errors/lease-lost.error.js';
import type { ResolvedModuleOptions } from '../options/module-options.util.js';

/** The part of `@opentelemetry/api` used here (structural: the package is an optional peer). */
type Attributes = Record<string, string | boolean>;
interface Counter {
  add(value: number, attributes?: Attributes): void;
}
interface Histogram {
  record(value: number, attributes?: Attributes): void;
}
interface Meter {
  createCounter(name: string, options?: { description?: string; unit?: string }): Counter;
  createHistogram(name: string, options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } }): Histogram;
}
interface OtelApi {
  metrics: { getMeter(name: string, version?: string): Meter };
  createNoopMeter?(): Meter;
}

export const METER_NAME = 'nest-distributed-lock';

/** Seconds; from 0.5 ms (an uncontended Redis lock) to 5 min (a long scheduled job). */
const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * OpenTelemetry counters and histograms fed by the service's lifecycle events. The meter is taken
 * from `@opentelemetry/api` when the module initialises: register your SDK's MeterProvider before
 * creating the Nest application. Without the package, or without an SDK, it does not subscribe at
 * all and costs nothing.
 * Labels: `lock.purpose`, `lock.backend` (and `lock.key` only with `metrics: { includeKey: true }`:
 * keys are unbounded, which metric backends handle badly).
 */
@Injectable()
export class DistributedLockMetrics implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(LOGGER_CONTEXT);
  private readonly unsubscribe: Array<() => void> = [];

  constructor(
    private readonly locks: LockEngine,
    @Inject(RESOLVED_LOCK_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    if (!this.options.metrics.enabled) return;
    let api: OtelApi;
    try {
      api = (await import('@opentelemetry/api')) as unknown as OtelApi;
    } catch {
      this.logger.debug('@opentelemetry/api is not installed: lock metrics are off');
      return;
    }
    const meter = api.metrics.getMeter(METER_NAME);
    // No SDK registered: the API hands out its shared no-op meter. Then do not even listen, so
    // the lock path builds no event objects for nobody.
    if (meter === api.createNoopMeter?.()) {
      this.logger.debug('no OpenTelemetry MeterProvider is registered: lock metrics are off');
      return;
    }
    this.record(meter);
  }

  onModuleDestroy(): void {
    for (const off of this.unsubscribe.splice(0)) off();
  }

  /** Every series carries `lock.kind`: 'lock', 'semaphore', 'multi-key' or 'leader' (a leader's terms are its `acquired`). */
  private record(meter: Meter): void {
    const counter = (name: string, description: string): Counter =>
      meter.createCounter(`distributed_lock.${name}`, { description, unit: '{lock}' });
    const acquired = counter('acquired', 'Locks acquired (reentrant acquisitions not counted)');
    const busy = counter('busy', 'Acquisitions that found the lock held by another owner (after any waiting)');
    const lost = counter('lost', 'Leases lost while held: expired, taken over, session lost, shutdown');
    const released = counter('released', 'Leases released by their holder');
    const releaseFailed = counter('release_failed', 'Releases that failed (the key then expires by itself)');
    const forceReleased = counter('force_released', 'forceRelease() calls of this process (lock.released: whether a holder was there)');
    const wait = meter.createHistogram('distributed_lock.wait.duration', {
      description: 'Time from asking for a lock to getting it or giving up',
      unit: 's',
      advice: { explicitBucketBoundaries: BUCKETS },
    });
    const hold = meter.createHistogram('distributed_lock.hold.duration', {
      description: 'Time a lease was held, from acquisition to release',
      unit: 's',
      advice: { explicitBucketBoundaries: BUCKETS },
    });

    const includeKey = this.options.metrics.includeKey;
    const labels = (e: { key: string; purpose: string; backend: string; kind: string }, extra?: Attributes): Attributes => ({
      'lock.purpose': e.purpose,
      'lock.backend': e.backend,
      'lock.kind': e.kind,
      ...(includeKey ? { 'lock.key': e.key } : {}),
      ...extra,
    });
    this.on('acquired', (e) => {
      if (e.reentrant) return;
      acquired.add(1, labels(e));
      wait.record(e.waitedMs / 1000, labels(e, { 'lock.outcome': 'acquired' }));
    });
    this.on('busy', (e) => {
      busy.add(1, labels(e));
      wait.record(e.waitedMs / 1000, labels(e, { 'lock.outcome': 'busy' }));
    });
    this.on('lost', (e) => {
      const reason = e.error instanceof LeaseLostError ? e.error.reason : 'unknown';
      lost.add(1, labels(e, { 'lock.loss_reason': reason }));
    });
    this.on('released', (e) => {
      released.add(1, labels(e, { 'lock.was_owner': e.wasOwner }));
      hold.record(e.heldMs / 1000, labels(e));
    });
    this.on('release-failed', (e) => releaseFailed.add(1, labels(e)));
    this.on('force-released', (e) =>
      forceReleased.add(1, { 'lock.backend': e.backend, 'lock.released': e.released, ...(includeKey ? { 'lock.key': e.key } : {}) }),
    );
  }

  private on<E extends LockEventName>(event: E, listener: (...args: LockEventMap[E]) => void): void {
    const events = this.locks.events;
    // A listener that threw would surface in the lock's caller: metrics must never do that.
    const safe = (...args: LockEventMap[E]): void => {
      try {
        listener(...args);
      } catch (error) {
        this.logger.debug(`metrics listener for ${event} failed: ${(error as Error)?.message ?? error}`);
      }
    };
    (events.on as (e: E, l: typeof safe) => unknown)(event, safe);
    this.unsubscribe.push(() => (events.off as (e: E, l: typeof safe) => unknown)(event, safe));
  }
}
