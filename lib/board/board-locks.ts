import { Injectable, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { LOCK_BACKENDS, type LockBackend } from '../backends/lock-backend.interface.js';
import { RESOLVED_LOCK_OPTIONS } from '../distributed-lock.constants.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { DistributedLockService } from '../distributed-lock.service.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { ListOptions } from '../interfaces/lock-info.interface.js';
import type { ResolvedModuleOptions } from '../options/module-options.util.js';
import { boardLock, type BoardView } from './board-view.js';

/** How often the page asks for the locks again (it never asks more often than once a second). */
export const BOARD_REFRESH_MS = 1_000;

/**
 * The board's reading of the application's lock module, found wherever the application imports
 * it (the lock module need not be global): every configured backend's held keys.
 */
@Injectable()
export class BoardLocks implements OnModuleInit {
  private service!: DistributedLockService;
  private backends!: ReadonlyMap<string, LockBackend>;
  private options!: ResolvedModuleOptions;

  constructor(private readonly moduleRef: ModuleRef) {}

  onModuleInit(): void {
    try {
      this.service = this.moduleRef.get(DistributedLockService, { strict: false });
      this.backends = this.moduleRef.get(LOCK_BACKENDS, { strict: false });
      this.options = this.moduleRef.get(RESOLVED_LOCK_OPTIONS, { strict: false });
    } catch {
      throw new Error('DistributedLockBoardModule shows the locks of DistributedLockModule: import DistributedLockModule.forRoot(…) in the same application');
    }
  }

  backendNames(): string[] {
    return [...this.backends.keys()];
  }

  private purposesOf(name: string): LockPurpose[] {
    return (Object.entries(this.options.purposes) as [LockPurpose, string][]).filter(([, b]) => b === name).map(([p]) => p);
  }

  /** Every backend's locks; a backend that cannot be read shows why, the others still show. Bad options throw. */
  async view(readOnly: boolean, options: ListOptions = {}): Promise<BoardView> {
    const clean: ListOptions = { ...(options.prefix === undefined ? {} : { prefix: options.prefix }), ...(options.limit === undefined ? {} : { limit: options.limit }) };
    const backends = await Promise.all(
      this.backendNames().map(async (name) => {
        const purposes = this.purposesOf(name);
        const backend = this.backends.get(name)!;
        if (!backend.listKeys || !backend.inspect) return { name, purposes, locks: [], error: 'this backend cannot list its locks (no listKeys())' };
        try {
          const locks = await this.service.list({ backend: name }, clean);
          return { name, purposes, locks: locks.map((info) => boardLock(info, purposes)) };
        } catch (error) {
          if (error instanceof InvalidLockOptionsError) throw error;
          return { name, purposes, locks: [], error: (error as Error)?.message ?? String(error) };
        }
      }),
    );
    return { readOnly, refreshMs: BOARD_REFRESH_MS, at: new Date().toISOString(), backends };
  }

  forceRelease(key: string, backend: string): Promise<boolean> {
    return this.service.forceRelease(key, { backend });
  }
}
