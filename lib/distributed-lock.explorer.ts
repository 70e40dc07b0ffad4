import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { RESOLVED_LOCK_OPTIONS } from './distributed-lock.constants.js';
import { DistributedLockService } from './distributed-lock.service.js';
import { bindInstance, DISTRIBUTED_LOCK_METADATA, type DecoratedMethod } from './decorators/decorated-method.registry.js';
import { InvalidLockOptionsError } from './errors/invalid-lock-options.error.js';
import { resolveMethodLock, type MethodKind } from './options/decorator-options.util.js';
import type { ResolvedModuleOptions } from './options/module-options.util.js';

/** Metadata keys of Nest's route decorators, @nestjs/schedule and @nestjs/event-emitter (read, never imported). */
const METHOD_METADATA = 'method';
const SCHEDULER_TYPE = 'SCHEDULER_TYPE';
const EVENT_LISTENER = 'EVENT_LISTENER_METADATA';

/**
 * At bootstrap: finds every `@DistributedLock` method of this application's providers and
 * controllers, validates its options against the configured backends (a bad one fails
 * `app.init()` naming class, method and field), and binds the instance to this application's
 * lock service. Until then a decorated method refuses to run.
 */
@Injectable()
export class DistributedLockExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly service: DistributedLockService,
    @Inject(RESOLVED_LOCK_OPTIONS) private readonly options: ResolvedModuleOptions,
  ) {}

  async onModuleInit(): Promise<void> {
    try {
      this.bindDecoratedMethods();
    } catch (error) {
      // Nest runs no shutdown hooks when init fails: close the clients we opened ourselves, or
      // their sockets would keep the process alive.
      await this.service.onApplicationShutdown();
      throw error;
    }
  }

  private bindDecoratedMethods(): void {
    const scanner = new MetadataScanner();
    const controllers = this.discovery.getControllers();
    const wrappers = [...this.discovery.getProviders().map((w) => ({ w, controller: false })), ...controllers.map((w) => ({ w, controller: true }))];
    for (const { w, controller } of wrappers) {
      const instance = w.isDependencyTreeStatic() ? (w.instance as object | undefined) : undefined;
      const prototype = instance ? Object.getPrototypeOf(instance) : (w.metatype as Function | undefined)?.prototype;
      if (!prototype || typeof prototype !== 'object') continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = prototype[name] as Function;
        const recorded = Reflect.getMetadata(DISTRIBUTED_LOCK_METADATA, method) as DecoratedMethod | undefined;
        if (!recorded) continue;
        const lock = resolveMethodLock(recorded.options, recorded.className, recorded.methodName, kindOf(method, controller), this.options);
        if (!instance) {
          throw new InvalidLockOptionsError(
            'scope',
            'request-scoped and transient providers are not supported by the decorator; call DistributedLockService.using() instead',
            `@DistributedLock on ${lock.where}`,
          );
        }
        bindInstance(instance, this.service, name, lock);
      }
    }
  }
}

function kindOf(method: Function, controller: boolean): MethodKind {
  if (controller && Reflect.getMetadata(METHOD_METADATA, method) !== undefined) return 'http';
  if (Reflect.getMetadata(SCHEDULER_TYPE, method) !== undefined) return 'scheduled';
  if (Reflect.getMetadata(EVENT_LISTENER, method) !== undefined) return 'event';
  return 'provider';
}
