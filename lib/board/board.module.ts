import { Inject, Logger, Module, type DynamicModule, type OnModuleInit } from '@nestjs/common';
import { BoardLocks } from './board-locks.js';
import { resolveBoardOptions, type DistributedLockBoardOptions, type ResolvedBoardOptions } from './board-options.js';
import { createBoardController } from './board.controller.js';

const BOARD_OPTIONS = Symbol('BOARD_OPTIONS');

/**
 * An operator's page of the locks held now: who holds what, for how long, who waits — and, with
 * `readOnly: false`, a button that frees a stuck key. Import it beside `DistributedLockModule`.
 * It refuses to start unless access is decided: a `guard`, or `public: true`.
 * @example
 * DistributedLockBoardModule.forRoot({ path: '/ops/locks', guard: AdminGuard, readOnly: false })
 */
@Module({})
export class DistributedLockBoardModule implements OnModuleInit {
  static forRoot(options: DistributedLockBoardOptions): DynamicModule {
    const resolved = resolveBoardOptions(options);
    return {
      module: DistributedLockBoardModule,
      controllers: [createBoardController(resolved)],
      providers: [BoardLocks, { provide: BOARD_OPTIONS, useValue: resolved }],
    };
  }

  constructor(@Inject(BOARD_OPTIONS) private readonly options: ResolvedBoardOptions) {}

  onModuleInit(): void {
    const options = this.options;
    if (options.public) {
      new Logger('DistributedLockBoard').warn(
        `the lock board at ${options.path} is public (no guard): whoever reaches this application sees every held key${options.readOnly ? '' : ' and can force-release it'}`,
      );
    }
  }
}
