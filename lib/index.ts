export { DistributedLockModule } from './distributed-lock.module.js';
export { DistributedLockService } from './distributed-lock.service.js';
export { DistributedLock } from './decorators/distributed-lock.decorator.js';
export { DistributedLockInterceptor } from './decorators/distributed-lock.interceptor.js';
export type { DistributedLockOptions, OnBusy } from './interfaces/distributed-lock-decorator-options.interface.js';
export { LockEvents, type LockEventMap, type LockEventName } from './engine/lock-events.js';
export { Lease } from './engine/lease.js';
export { METER_NAME } from './metrics/lock-metrics.js';
export {
  DistributedLockHealthIndicator,
  type LockHealthEntry,
  type LockHealthResult,
  type LockPingOptions,
} from './health/distributed-lock.health.js';
export * from './errors/index.js';
export type { DistributedLockModuleOptions, LockDefaults, LockPurpose } from './interfaces/distributed-lock-options.interface.js';
export type { RedisBackendOptions } from './backends/redis/redis-backend.options.js';
export type { RedlockBackendOptions } from './backends/redlock/redlock-backend.options.js';
export type { EtcdBackendOptions } from './backends/etcd/etcd-backend.options.js';
export type { PostgresBackendOptions, PostgresBackendConfig } from './backends/postgres/postgres-backend.options.js';
export type { MySqlBackendOptions, MySqlBackendConfig } from './backends/mysql/mysql-backend.options.js';
export type { ZooKeeperBackendOptions, ZooKeeperBackendConfig } from './backends/zookeeper/zookeeper-backend.options.js';
export type { MemoryBackendOptions } from './backends/memory/memory-backend.options.js';
export type { CampaignOptions, LockMode, LockOptions } from './interfaces/lock-options.interface.js';
export type { ListOptions, LockInfo, LockTarget } from './interfaces/lock-info.interface.js';
export type { RedisClientLike } from './backends/redis/redis-client.interface.js';
export type { NodeRedisLike } from './backends/redis/node-redis-client.js';
export type { RedisClientInput } from './backends/redis/redis-client.check.js';
export type {
  AcquireRequest,
  AcquireResult,
  HeldLock,
  HoldKind,
  LockBackend,
  LockBackendCapabilities,
  LockLossListener,
  ReadMode,
  UpgradeResult,
} from './backends/lock-backend.interface.js';
export { RedisBackend } from './backends/redis/redis.backend.js';
export { RedlockBackend, type RedlockBackendConfig } from './backends/redlock/redlock.backend.js';
export type { RedisBackendConfig } from './backends/redis/redis-backend.options.js';
export { MemoryBackend } from './backends/memory/memory.backend.js';
export { EtcdBackend } from './backends/etcd/etcd.backend.js';
export type { EtcdBackendConfig } from './backends/etcd/etcd-backend.options.js';
export { PostgresBackend } from './backends/postgres/postgres.backend.js';
export type { PgPoolLike } from './backends/postgres/postgres-client.interface.js';
export { MySqlBackend } from './backends/mysql/mysql.backend.js';
export type { MySqlPoolLike } from './backends/mysql/mysql-client.interface.js';
export { ZooKeeperBackend } from './backends/zookeeper/zookeeper.backend.js';
export type { ZooKeeperClientLike } from './backends/zookeeper/zookeeper-client.interface.js';
export { PgTransactionLock, type PgTransactionLockOptions, type PgTransactionAcquireOptions, type PgTransactionClient } from './backends/postgres/pg-transaction-lock.js';
export { MySqlTransactionLock, type MySqlTransactionLockOptions, type MySqlTransactionAcquireOptions, type MySqlTransactionClient, type MySqlStatementRunner } from './backends/mysql/mysql-transaction-lock.js';
export { RedisFence, type RedisFenceOptions } from './fencing/redis-fence.js';
export { PgFence, type PgFenceOptions, type PgQueryable } from './fencing/pg-fence.js';
export { MySqlFence, type MySqlFenceOptions, type MySqlQueryable } from './fencing/mysql-fence.js';
export { EtcdFence, type EtcdFenceOptions } from './fencing/etcd-fence.js';
export type { LeaseSource } from './fencing/fence-token.util.js';
export type { EtcdClientLike } from './backends/etcd/etcd-client.interface.js';
