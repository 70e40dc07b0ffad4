import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, LazyModuleLoader } from '@nestjs/core';
import { RESOLVED_LOCK_OPTIONS } from '../distributed-lock.constants.js';
import { LockEngine } from '../engine/lock-engine.js';
import { bindInstance } from './instance-binding.js';
import { declarationsOf, type DecoratedMethod } from './lock-metadata.js';
import { DistributedLockError } from '../errors/distributed-lock.error.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { refuseConflictingLocks, resolveMethodLock, type MethodKind, type ResolvedMethodLock } from '../options/decorator-options.util.js';
import type { ResolvedModuleOptions } from '../options/module-options.util.js';

/** Metadata keys of Nest's route decorators, @nestjs/schedule and @nestjs/event-emitter (read, never imported). */
const METHOD_METADATA = 'method';
const SCHEDULER_TYPE = 'SCHEDULER_TYPE';
const EVENT_LISTENER = 'EVENT_LISTENER_METADATA';

/**
 * At bootstrap: finds every `@DistributedLock` method of this application's providers and
 * controllers, validates its options against the configured backends (a bad one fails
 * `app.init()` naming class, method and field), and binds the instance to this application's
 * lock engine. Until then a decorated method refuses to run. Modules loaded later with
 * `LazyModuleLoader` are explored the same way when they load (a bad declaration fails `load()`).
 */
@Injectable()
export class DistributedLockExplorer implements OnModuleInit {
  /** Whether the bootstrap scan has run (loads before it are left to it). */
  private initialised = false;
  /** Instances (or, for scoped providers, wrappers) already explored: a later scan skips them. */
  private readonly explored = new WeakSet<object>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly engine: LockEngine,
    @Inject(RESOLVED_LOCK_OPTIONS) private readonly options: ResolvedModuleOptions,
    lazyModules: LazyModuleLoader,
  ) {
    this.exploreLazilyLoadedModules(lazyModules);
  }

  async onModuleInit(): Promise<void> {
    try {
      this.bindDecoratedMethods();
    } catch (error) {
      // Nest runs no shutdown hooks when init fails: close the clients we opened ourselves, or
      // their sockets would keep the process alive.
      await this.engine.onApplicationShutdown();
      throw error;
    }
    this.initialised = true;
  }

  /**
   * Nest runs no lifecycle hook in a lazily loaded module and announces no load, so without this
   * its decorated providers would never be bound and would refuse every call. The application's
   * one `LazyModuleLoader` (a singleton of Nest's core module, the one `app.get()` and injection
   * give) is the only way in: its `load()` is wrapped, on this instance only, to explore the
   * providers that are new once the modules are built. A bad declaration there rejects that
   * `load()` naming the method and the field, and its provider stays unbound (its calls refuse to
   * run). Wrapped from construction on, so a load still in flight at bootstrap is explored when
   * it lands; one that lands before bootstrap is left to the bootstrap scan.
   */
  private exploreLazilyLoadedModules(loader: LazyModuleLoader): void {
    const load = loader.load;
    const explore = (): void => {
      if (this.initialised) this.bindDecoratedMethods();
    };
    loader.load = async function (this: LazyModuleLoader, ...args: Parameters<LazyModuleLoader['load']>) {
      const moduleRef = await load.apply(this, args);
      explore();
      return moduleRef;
    };
  }

  private bindDecoratedMethods(): void {
    this.refuseSecondModule();
    const controllers = this.discovery.getControllers();
    const wrappers = [...this.discovery.getProviders().map((w) => ({ w, controller: false })), ...controllers.map((w) => ({ w, controller: true }))];
    for (const { w, controller } of wrappers) {
      const instance = w.isDependencyTreeStatic() ? (w.instance as object | undefined) : undefined;
      // A value provider's value may be a string, a number or null: only objects have locks to bind.
      const seen: object = (typeof instance === 'object' && instance !== null) || typeof instance === 'function' ? instance : w;
      if (this.explored.has(seen)) continue;
      this.explored.add(seen);
      const prototype = instance ? Object.getPrototypeOf(instance) : (w.metatype as Function | undefined)?.prototype;
      if (!prototype || typeof prototype !== 'object') continue;
      const declared = declaredMethods(prototype);
      if (instance) refuseShadowing(instance, declared);
      for (const { levels } of declared) {
        // One call of the method takes every declaration found here: the outermost of the
        // override first, then (through super) those of the method it overrides.
        const resolved: Array<{ declaration: DecoratedMethod; lock: ResolvedMethodLock }> = [];
        for (const { method, declarations } of levels) {
          const level: typeof resolved = [];
          for (const declaration of declarations) {
            const lock = resolveMethodLock(declaration.options, declaration.className, declaration.methodName, kindOf(method, controller), this.options);
            if (!instance) {
              throw new InvalidLockOptionsError(
                'scope',
                'request-scoped and transient providers are not supported by the decorator; call DistributedLockService.using() instead',
                `@DistributedLock on ${lock.where}`,
              );
            }
            level.push({ declaration, lock });
          }
          // Recorded innermost first; a call takes the outermost first.
          resolved.push(...level.reverse());
        }
        refuseConflictingLocks(resolved.map(({ lock }) => lock));
        for (const { declaration, lock } of resolved) {
          bindInstance(instance!, this.engine, declaration, lock);
        }
      }
    }
  }

  /**
   * Every explorer binds every provider of the application it finds: with two lock modules the
   * last one would silently serve all of them. One module per application, every backend in it.
   */
  private refuseSecondModule(): void {
    const engines = new Set(this.discovery.getProviders().map((w) => w.instance).filter((i) => i instanceof LockEngine));
    if (engines.size > 1) {
      throw new DistributedLockError(
        `DistributedLockModule.forRoot()/forRootAsync() is imported ${engines.size} times in one application: decorated methods ` +
          'could not tell which lock service serves them. Import it once (in the root module; it is global) and configure every backend there.',
      );
    }
  }
}

/** An own property of the instance (set in the constructor) that hides a decorated method would run unlocked. */
function refuseShadowing(instance: object, declared: readonly DeclaredMethod[]): void {
  for (const { levels } of declared) {
    const declarations = levels[0].declarations;
    const d = declarations[declarations.length - 1];
    if (Object.prototype.hasOwnProperty.call(instance, d.methodName)) {
      throw new DistributedLockError(
        `${instance.constructor?.name ?? 'An instance'}.${d.methodName} is an own property of the instance that hides @DistributedLock ` +
          `${d.className}.${d.methodName}, so calls to it would run unlocked: bind it another way (an arrow calling the method) or rename it`,
      );
    }
  }
}

/** A decorated method of a class: its definition on each level of the prototype chain that declares locks, most derived first. */
interface DeclaredMethod {
  name: string | symbol;
  levels: Array<{ method: Function; declarations: readonly DecoratedMethod[] }>;
}

/**
 * The decorated methods of a class, walking its prototype chain: each level's own declarations
 * (a decorated override and the decorated base it calls with `super` each take their lock). An
 * override that declares no lock over a decorated base would run unlocked: refused.
 */
function declaredMethods(prototype: object): DeclaredMethod[] {
  const found = new Map<string | symbol, DeclaredMethod>();
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
      if (declarations.length === 0) continue;
      let entry = found.get(name);
      if (!entry) found.set(name, (entry = { name, levels: [] }));
      entry.levels.push({ method: descriptor!.value as Function, declarations });
    }
  }
  return [...found.values()];
}

function kindOf(method: Function, controller: boolean): MethodKind {
  if (controller && Reflect.getMetadata(METHOD_METADATA, method) !== undefined) return 'http';
  if (Reflect.getMetadata(SCHEDULER_TYPE, method) !== undefined) return 'scheduled';
  if (Reflect.getMetadata(EVENT_LISTENER, method) !== undefined) return 'event';
  return 'provider';
}
