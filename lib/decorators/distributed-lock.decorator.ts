import { UseInterceptors } from '@nestjs/common';
import { Observable, throwError } from 'rxjs';
import { DistributedLockError } from '../errors/distributed-lock.error.js';
import type { DistributedLockOptions } from '../interfaces/distributed-lock-decorator-options.interface.js';
import { DistributedLockInterceptor } from './distributed-lock.interceptor.js';
import { copyMethodMetadata } from './copy-metadata.util.js';
import { bindingOf } from './instance-binding.js';
import { declarationsOf, DISTRIBUTED_LOCK_METADATA, type DecoratedMethod } from './lock-metadata.js';
import { invokeLocked, invokeLockedObservable } from './locked-invocation.js';

/**
 * Run the method only while holding a distributed lock, and hold it until the returned Promise
 * settles or the returned Observable completes, errors or is unsubscribed. Works on controller
 * handlers and on any provider method (`@Cron`, `@Interval`, `@Timeout`, `@OnEvent`, …), above or
 * below the other decorators. Options are validated at bootstrap; the decorated method never runs
 * without its lock, and its own errors pass through untouched. It becomes async.
 *
 * @example
 * @Cron('0 * * * * *')
 * @DistributedLock({ purpose: 'efficiency', key: 'hourly-report' })   // skips when busy
 * async hourlyReport() { … }
 *
 * @Post(':id/charge')
 * @DistributedLock({ purpose: 'correctness', key: (id: string) => `order:${id}` })  // 409 when busy
 * async charge(@Param('id') id: string) { const { token } = this.locks.current()!; … }
 */
export function DistributedLock<A extends unknown[] = any[]>(options: DistributedLockOptions<A>) {
  return <F extends (...args: [...A, ...any[]]) => unknown>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<F>,
  ): TypedPropertyDescriptor<F> => {
    const original = descriptor.value as unknown as Function | undefined;
    const className = (typeof target === 'function' ? target : target.constructor).name;
    const methodName = String(propertyKey);
    if (typeof original !== 'function') {
      throw new DistributedLockError(`@DistributedLock on ${className}.${methodName}: can only decorate methods`);
    }
    if (typeof target === 'function') {
      // A static method has no instance for Nest to bind to a lock service: it could never run.
      throw new DistributedLockError(
        `@DistributedLock on static ${className}.${methodName}: only instance methods of providers and controllers can be locked; ` +
          'use DistributedLockService.using() in a static method',
      );
    }
    const returnType = Reflect.getMetadata('design:returntype', target, propertyKey) as { name?: string } | undefined;
    const returnsObservable = returnType === Observable || returnType?.name === 'Observable';

    const recorded: DecoratedMethod = { options: options as DistributedLockOptions, className, methodName };
    const locked = function (this: unknown, ...args: unknown[]): unknown {
      const binding = bindingOf(this);
      const lock = binding?.locks.get(recorded);
      if (!binding || !lock) {
        // Fail closed: never run the method unlocked.
        const error = new DistributedLockError(
          `@DistributedLock on ${className}.${methodName}: no lock service serves this instance. ` +
            `Import DistributedLockModule.forRoot()/forRootAsync() in the application, let Nest create ${className} ` +
            `(a singleton provider or controller, not \`new\`), and call the method after the application has initialised.`,
        );
        return returnsObservable ? throwError(() => error) : Promise.reject(error);
      }
      return returnsObservable
        ? invokeLockedObservable(binding.engine, lock, this, original, args)
        : invokeLocked(binding.engine, lock, this, original, args);
    };
    // Stacked declarations: the inner wrapper's are kept, this one's added (each takes its lock).
    const inner = declarationsOf(original);
    copyMethodMetadata(original, locked);
    Reflect.defineMetadata(DISTRIBUTED_LOCK_METADATA, [...inner, recorded], locked);
    descriptor.value = locked as unknown as F;
    // Maps LockBusyError → 409 and LockBackendUnavailableError → 503 on HTTP handlers; a no-op elsewhere.
    UseInterceptors(DistributedLockInterceptor)(target, propertyKey, descriptor);
    return descriptor;
  };
}
