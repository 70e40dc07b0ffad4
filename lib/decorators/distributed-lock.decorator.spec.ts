import 'reflect-metadata';
import { Cron, Interval } from '@nestjs/schedule';

/** @nestjs/schedule's SchedulerType values (the enum is not exported from its root). */
const SchedulerType = { CRON: 1, TIMEOUT: 2, INTERVAL: 3 } as const;
import { Get } from '@nestjs/common';
import { DistributedLockError } from '../errors/distributed-lock.error.js';
import { DistributedLock } from './distributed-lock.decorator.js';
import { DISTRIBUTED_LOCK_METADATA } from './lock-metadata.js';

const SCHEDULER_TYPE = 'SCHEDULER_TYPE';
const CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS';

describe('@DistributedLock wrapper', () => {
  class Jobs {
    ran = 0;

    @DistributedLock({ purpose: 'efficiency' })
    @Cron('*/5 * * * * *', { name: 'below' })
    lockAbove(): void {
      this.ran += 1;
    }

    @Cron('*/5 * * * * *', { name: 'above' })
    @DistributedLock({ purpose: 'efficiency' })
    lockBelow(): void {
      this.ran += 1;
    }

    @DistributedLock({ purpose: 'efficiency' })
    @Interval(1000)
    interval(): void {}

    @DistributedLock({ purpose: 'efficiency', key: (id: string) => `x:${id}` })
    @Get(':id')
    route(id: string, _extra?: number): string {
      return id;
    }
  }

  it.each(['lockAbove', 'lockBelow'] as const)('keeps @Cron metadata and the method name (%s)', (name) => {
    const method = Jobs.prototype[name];
    expect(method.name).toBe(name);
    expect(Reflect.getMetadata(SCHEDULER_TYPE, method)).toBe(SchedulerType.CRON);
    expect(Reflect.getMetadata(CRON_OPTIONS, method)).toMatchObject({ cronTime: '*/5 * * * * *' });
    expect(Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, method)).toMatchObject([{ className: 'Jobs', methodName: name }]);
  });

  it('keeps @Interval and route metadata, and adds the interceptor', () => {
    expect(Reflect.getMetadata(SCHEDULER_TYPE, Jobs.prototype.interval)).toBe(SchedulerType.INTERVAL);
    expect(Reflect.getMetadata('path', Jobs.prototype.route)).toBe(':id');
    expect(Reflect.getMetadata('__interceptors__', Jobs.prototype.route)).toHaveLength(1);
  });

  it('fails closed when no lock service serves the instance: the method does not run', async () => {
    const jobs = new Jobs(); // created by hand, not by Nest
    await expect(jobs.lockAbove()).rejects.toBeInstanceOf(DistributedLockError);
    await expect(jobs.lockBelow()).rejects.toThrow(/Import DistributedLockModule.*let Nest create Jobs/);
    expect(jobs.ran).toBe(0);
  });
});

describe('@DistributedLock types', () => {
  it('are checked at compile time (tsc runs before the tests)', () => {
    class TypeChecks {
      // @ts-expect-error purpose is required
      @DistributedLock({ key: 'x' })
      noPurpose(): void {}

      // @ts-expect-error the key function must accept the method's leading arguments
      @DistributedLock({ purpose: 'efficiency', key: (n: number) => `n:${n}` })
      wrongKeyArgs(s: string): string {
        return s;
      }

      @DistributedLock({ purpose: 'correctness', key: (id: string, amount: number) => `${id}:${amount}` })
      rightKeyArgs(id: string, amount: number, _note?: string): string {
        return `${id}${amount}`;
      }
    }
    expect(typeof TypeChecks.prototype.rightKeyArgs).toBe('function');
  });
});
