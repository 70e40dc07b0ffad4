import { Module } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { DistributedLockModule, DistributedLockService, RedisFence } from 'nest-distributed-lock';
import { ACCOUNT_STORE } from '../accounts/account-store.js';
import { RedisAccountStore } from '../accounts/redis-account.store.js';
import { RedisCloser, REDIS, redisProvider } from '../redis.provider.js';

@Module({ providers: [redisProvider, RedisCloser], exports: [REDIS] })
class RedisModule {}

/** The default: efficiency locks on Redis, correctness locks on etcd, balances in a fenced Redis store. */
@Module({
  imports: [
    RedisModule,
    DistributedLockModule.forRootAsync({
      isGlobal: true,
      imports: [RedisModule],
      inject: [REDIS],
      useFactory: (redis: Redis) => ({
        redis: { client: redis }, // efficiency locks, on the application's own client
        etcd: {
          hosts: (process.env.ETCD_HOSTS ?? '127.0.0.1:2379').split(','), // correctness locks
          sessionTtlSeconds: Number(process.env.ETCD_SESSION_TTL ?? 10),
        },
        defaults: { ttl: 10_000, wait: 0 },
      }),
    }),
  ],
  providers: [
    {
      provide: ACCOUNT_STORE,
      inject: [REDIS, DistributedLockService],
      useFactory: (redis: Redis, locks: DistributedLockService) => new RedisAccountStore(new RedisFence(redis, { leases: locks, keyPrefix: 'sample:' })),
    },
  ],
  exports: [ACCOUNT_STORE],
})
export class RedisEtcdLocksModule {}
