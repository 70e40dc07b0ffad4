import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { createBackends } from './backends/create-backends.util.js';
import { RESOLVED_LOCK_OPTIONS } from './distributed-lock.constants.js';
import { ConfigurableDistributedLockModule, DISTRIBUTED_LOCK_MODULE_OPTIONS } from './distributed-lock.module-definition.js';
import { DistributedLockExplorer } from './decorators/distributed-lock.explorer.js';
import { DistributedLockService } from './distributed-lock.service.js';
import { LOCK_ENGINE_CONFIG, LockEngine, type LockEngineConfig } from './engine/lock-engine.js';
import { DistributedLockHealthIndicator } from './health/distributed-lock.health.js';
import { DistributedLockMetrics } from './metrics/lock-metrics.js';
import type { DistributedLockModuleOptions } from './interfaces/distributed-lock-options.interface.js';
import { LOCK_BACKENDS } from './backends/lock-backend.interface.js';
import { resolveModuleOptions, type ResolvedModuleOptions } from './options/module-options.util.js';

/**
 * @example
 * DistributedLockModule.forRoot({ redis: { url: 'redis://127.0.0.1:6379' }, isGlobal: true })
 * DistributedLockModule.forRootAsync({
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ redis: { url: config.getOrThrow('REDIS_URL') } }),
 * })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    {
      provide: RESOLVED_LOCK_OPTIONS,
      inject: [DISTRIBUTED_LOCK_MODULE_OPTIONS],
      useFactory: (options: DistributedLockModuleOptions) => resolveModuleOptions(options),
    },
    {
      provide: LOCK_BACKENDS,
      inject: [RESOLVED_LOCK_OPTIONS],
      useFactory: (options: ResolvedModuleOptions) => createBackends(options),
    },
    {
      provide: LOCK_ENGINE_CONFIG,
      inject: [RESOLVED_LOCK_OPTIONS],
      useFactory: (options: ResolvedModuleOptions): LockEngineConfig => ({ driftFactor: options.driftFactor, appBackends: Object.keys(options.backends) }),
    },
    LockEngine,
    DistributedLockService,
    DistributedLockExplorer,
    DistributedLockHealthIndicator,
    DistributedLockMetrics,
  ],
  exports: [DistributedLockService, DistributedLockHealthIndicator],
})
export class DistributedLockModule extends ConfigurableDistributedLockModule {}
