import { Inject, Injectable } from '@nestjs/common';
import { RESOLVED_LOCK_OPTIONS } from '../distributed-lock.constants.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import { LOCK_BACKENDS, type LockBackend } from '../backends/lock-backend.interface.js';
import type { ResolvedModuleOptions } from '../options/module-options.util.js';

/** One indicator's entry, in the shape `@nestjs/terminus` expects (`status` `'up'` or `'down'`). */
export interface LockHealthEntry {
  status: 'up' | 'down';
  /** The backend's name (`redis`, `etcd`, `memory`, or yours). */
  backend: string;
  /** The purposes this backend serves. */
  purposes: LockPurpose[];
  /** How long the check took, ms. */
  responseTimeMs: number;
  /** Why it is down, or `'no ping() on this backend'` for a custom backend that cannot be checked. */
  message?: string;
}

/** What an indicator returns: `@nestjs/terminus`'s `HealthIndicatorResult`. */
export type LockHealthResult = Record<string, LockHealthEntry>;

export interface LockPingOptions {
  /** Longest wait for the answer, connecting included, ms. @default 1000 */
  timeout?: number;
  /** The key of the entry in the health report. @default the backend's name */
  key?: string;
}

/**
 * Health of the lock backends for `@nestjs/terminus` (an optional peer: this class does not
 * import it). An unreachable backend never makes a check throw: it resolves with `status: 'down'`
 * when the backend does not answer in time, which terminus reports as 503. A backend name that is
 * not configured, or a bad timeout, is a programming error: `InvalidLockOptionsError`, at once.
 * @example
 * this.health.check([() => this.locks.pingCheck('redis'), () => this.locks.pingCheck('etcd', { timeout: 500 })])
 */
@Injectable()
export class DistributedLockHealthIndicator {
  constructor(
    @Inject(LOCK_BACKENDS) private readonly backends: ReadonlyMap<string, LockBackend>,
    @Inject(RESOLVED_LOCK_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  /** Redis `PING`, etcd linearizable read, … on one configured backend. */
  async pingCheck(backend: string, options: LockPingOptions = {}): Promise<LockHealthResult> {
    const target = this.backends.get(backend);
    if (!target) {
      throw new InvalidLockOptionsError('backend', `unknown backend ${JSON.stringify(backend)} (configured: ${[...this.backends.keys()].join(', ')})`, 'DistributedLockHealthIndicator.pingCheck');
    }
    const timeout = options.timeout ?? 1000;
    if (typeof timeout !== 'number' || !(timeout > 0) || !Number.isFinite(timeout)) {
      throw new InvalidLockOptionsError('timeout', `must be a positive number of ms, got ${String(timeout)}`, 'DistributedLockHealthIndicator.pingCheck');
    }
    return { [options.key ?? backend]: await this.check(backend, target, timeout) };
  }

  /** Every configured backend, each under its own name. */
  async isHealthy(options: Omit<LockPingOptions, 'key'> = {}): Promise<LockHealthResult> {
    const results = await Promise.all([...this.backends.keys()].map((name) => this.pingCheck(name, options)));
    return Object.assign({}, ...results) as LockHealthResult;
  }

  private async check(name: string, backend: LockBackend, timeout: number): Promise<LockHealthEntry> {
    const purposes = (Object.entries(this.options.purposes) as [LockPurpose, string][]).filter(([, b]) => b === name).map(([p]) => p);
    const started = performance.now();
    const entry = (status: 'up' | 'down', message?: string): LockHealthEntry => ({
      status,
      backend: name,
      purposes,
      responseTimeMs: Math.round(performance.now() - started),
      ...(message === undefined ? {} : { message }),
    });
    if (!backend.ping) return entry('up', 'no ping() on this backend');
    try {
      await backend.ping(timeout);
      return entry('up');
    } catch (error) {
      return entry('down', (error as Error)?.message ?? String(error));
    }
  }
}
