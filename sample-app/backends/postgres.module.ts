import { Inject, Injectable, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Pool } from 'pg';
import { DistributedLockModule } from 'nest-distributed-lock';
import { ACCOUNT_STORE } from '../accounts/account-store.js';
import { PgAccountStore } from '../accounts/pg-account.store.js';

const PG_POOL = Symbol('PG_POOL');

/** The application's own pool: the lock module uses it but never closes it. */
@Injectable()
class PoolCloser implements OnApplicationShutdown {
  constructor(@Inject(PG_POOL) private readonly pool: Pool) {}

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}

@Module({
  providers: [
    {
      provide: PG_POOL,
      useFactory: () => {
        const pool = new Pool({ connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
        // An idle connection that breaks (the server restarted) must not crash the process.
        pool.on('error', (error) => new Logger('PgPool').warn(error.message));
        return pool;
      },
    },
    PoolCloser,
  ],
  exports: [PG_POOL],
})
class PgPoolModule {}

/**
 * SAMPLE_BACKEND=postgres: PostgreSQL alone serves both purposes — the correctness deposit takes
 * its lease and token from it, the balances sit in a PgFence-guarded table of the same database.
 */
@Module({
  imports: [
    PgPoolModule,
    DistributedLockModule.forRootAsync({
      isGlobal: true,
      imports: [PgPoolModule],
      inject: [PG_POOL],
      useFactory: (pool: Pool) => ({ postgres: { pool }, defaults: { ttl: 10_000, wait: 0 } }),
    }),
  ],
  providers: [{ provide: ACCOUNT_STORE, inject: [PG_POOL], useFactory: (pool: Pool) => new PgAccountStore(pool) }],
  exports: [ACCOUNT_STORE],
})
export class PostgresLocksModule {}
