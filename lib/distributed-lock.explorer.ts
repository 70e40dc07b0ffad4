import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { RESOLVED_LOCK_OPTIONS } from './distributed-lock.constants.js';
import { DistributedLockService } from './distributed-lock.service.js';
import { bindInstance, declarationsOf, type DecoratedMethod } from './decorators/decorated-method.registry.js';
import { DistributedLockError } from './errors/distributed-lock.error.js';
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
    this.refuseSecondModule();
    const controllers = this.discovery.getControllers();
    const wrappers = [...this.discovery.getProviders().map((w) => ({ w, controller: false })), ...controllers.map((w) => ({ w, controller: true }))];
    for (const { w, controller } of wrappers) {
      const instance = w.isDependencyTreeStatic() ? (w.instance as object | undefined) : undefined;
      const prototype = instance ? Object.getPrototypeOf(instance) : (w.metatype as Function | undefined)?.prototype;
      if (!prototype || typeof prototype !== 'object') continue;
      const declared = declaredMethods(prototype);
      if (instance) refuseShadowing(instance, declared);
      for (const { method, declarations } of declared) {
        for (const declaration of declarations) {
          const lock = resolveMethodLock(declaration.options, declaration.className, declaration.methodName, kindOf(method, controller), this.options);
          if (!instance) {
            throw new InvalidLockOptionsError(
              'scope',
              'request-scoped and transient providers are not supported by the decorator; call DistributedLockService.using() instead',
              `@DistributedLock on ${lock.where}`,
            );
          }
          bindInstance(instance, this.service, declaration, lock, () => !this.service.isShuttingDown);
        }
      }
    }
  }

  /**
   * Every explorer binds every provider of the application it finds: with two lock modules the
   * last one would silently serve all of them. One module per application, every backend in it.
   */
  private refuseSecondModule(): void {
    const services = new Set(this.discovery.getProviders().map((w) => w.instance).filter((i) => i instanceof DistributedLockService));
    if (services.size > 1) {
      throw new DistributedLockError(
        `DistributedLockModule.forRoot()/forRootAsync() is imported ${services.size} times in one application: decorated methods ` +
          'could not tell which lock service serves them. Import it once (in the root module; it is global) and configure every backend there.',
      );
    }
  }
}

/** An own property of the instance (set in the constructor) that hides a decorated method would run unlocked. */
function refuseShadowing(instance: object, declared: ReadonlyArray<{ declarations: readonly DecoratedMethod[] }>): void {
  for (const { declarations } of declared) {
    const d = declarations[declarations.length - 1];
    if (Object.prototype.hasOwnProperty.call(instance, d.methodName)) {
      throw new DistributedLockError(
        `${instance.constructor?.name ?? 'An instance'}.${d.methodName} is an own property of the instance that hides @DistributedLock ` +
          `${d.className}.${d.methodName}, so calls to it would run unlocked: bind it another way (an arrow calling the method) or rename it`,
      );
    }
  }
}

/**
 * The decorated methods of a class, walking its prototype chain: each level's own declarations
 * (a decorated override and the decorated base it calls with `super` each take their lock). An
 * override that declares no lock over a decorated base would run unlocked: refused.
 */
function declaredMethods(prototype: object): Array<{ method: Function; declarations: readonly DecoratedMethod[] }> {
  const found: Array<{ method: Function; declarations: readonly DecoratedMethod[] }> = [];
  const nearest = new Map<string | symbol, { level: object; declared: boolean }>();
  for (let level: object | null = prototype; level && level !== Object.prototype; level = Object.getPrototypeOf(level)) {
    for (const name of Reflect.ownKeys(level)) {
      if (name === 'constructor') continue;
      const descriptor = Object.getOwnPropertyDescriptor(level, name);
      // An accessor (an autobind-style @Bind getter, say) counts as an undeclared definition: it
      // can hide a decorated method below it.
      const accessor = descriptor !== undefined && (descriptor.get !== undefined || descriptor.set !== undefined);
      if (!accessor && typeof descriptor?.value !== 'function') continue;
      const declarations = accessor ? [] : declarationsOf(descriptor!.value);
      const first = nearest.get(name);
      if (!first) nearest.set(name, { level, declared: declarations.length > 0 });
      else if (!first.declared && declarations.length > 0) {
        const sub = (first.level as { constructor?: Function }).constructor?.name ?? 'a subclass';
        throw new DistributedLockError(
          `${sub}.${String(name)} overrides @DistributedLock ${declarations[declarations.length - 1].className}.${String(name)} without declaring a lock, ` +
            `so it would run unlocked: put @DistributedLock on the override too (it may call super.${String(name)}()), or rename it`,
        );
      }
      if (declarations.length > 0) found.push({ method: descriptor!.value as Function, declarations });
    }
  }
  return found;
}

function kindOf(method: Function, controller: boolean): MethodKind {
  if (controller && Reflect.getMetadata(METHOD_METADATA, method) !== undefined) return 'http';
  if (Reflect.getMetadata(SCHEDULER_TYPE, method) !== undefined) return 'scheduled';
  if (Reflect.getMetadata(EVENT_LISTENER, method) !== undefined) return 'event';
  return 'provider';
}
