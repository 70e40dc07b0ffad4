import { Module, type DynamicModule } from '@nestjs/common';
import { DistributedLockModule } from '../distributed-lock.module.js';
import type { DistributedLockModuleOptions, LockDefaults } from '../interfaces/distributed-lock-options.interface.js';
import { TestingLockBackend } from './testing-lock-backend.js';

export interface DistributedLockTestingOptions {
  /** Lock defaults, as in `forRoot()`. */
  defaults?: LockDefaults;
  /** As in `forRoot()`. @default 0.01 */
  driftFactor?: number;
  /**
   * The backend's name: give it the name your locks set in `backend:` (if any), so they route here.
   * @default 'memory'
   */
  name?: string;
  /** Metrics, as in `forRoot()`. @default false */
  metrics?: DistributedLockModuleOptions['metrics'];
  /** Register globally, like `forRoot({ isGlobal: true })`. @default true */
  isGlobal?: boolean;
}

/**
 * `DistributedLockModule` for unit tests, without servers: both purposes are served by one
 * in-memory `TestingLockBackend` (NOT distributed), which the test injects to make a key busy,
 * expire a lease, make the backend unavailable or slow. `@DistributedLock` methods, the service
 * and the interceptor behave as with Redis or etcd (tokens included).
 * @example
 * const moduleRef = await Test.createTestingModule({
 *   imports: [DistributedLockTestingModule.forRoot()],
 *   providers: [DigestJob],
 * }).compile();
 * await moduleRef.init();
 * const locks = moduleRef.get(TestingLockBackend);
 * const release = await locks.occupy('digest'); // another replica holds it
 */
@Module({})
export class DistributedLockTestingModule {
  static forRoot(options: DistributedLockTestingOptions = {}): DynamicModule {
    const name = options.name ?? 'memory';
    const backend = new TestingLockBackend(name);
    return {
      module: DistributedLockTestingModule,
      global: options.isGlobal ?? true,
      imports: [
        DistributedLockModule.forRoot({
          backends: { [name]: backend },
          purposes: { efficiency: name, correctness: name },
          ...(options.defaults === undefined ? {} : { defaults: options.defaults }),
          ...(options.driftFactor === undefined ? {} : { driftFactor: options.driftFactor }),
          metrics: options.metrics ?? false,
          isGlobal: options.isGlobal ?? true,
        }),
      ],
      providers: [{ provide: TestingLockBackend, useValue: backend }],
      exports: [DistributedLockModule, TestingLockBackend],
    };
  }
}
