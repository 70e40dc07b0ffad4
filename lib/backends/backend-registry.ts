import type { OptionsOf } from './backend-plugin.interface.js';
import { etcdPlugin } from './etcd/etcd.plugin.js';
import { memoryPlugin } from './memory/memory.plugin.js';
import { mysqlPlugin } from './mysql/mysql.plugin.js';
import { postgresPlugin } from './postgres/postgres.plugin.js';
import { redisPlugin } from './redis/redis.plugin.js';
import { redlockPlugin } from './redlock/redlock.plugin.js';
import { zookeeperPlugin } from './zookeeper/zookeeper.plugin.js';

/**
 * The built-in backends: each key is a `forRoot()` field (and the backend's name), its JSDoc what
 * users see on that field. Registering a backend is one line here. The order is the preference of
 * the default purpose routing (`options/purpose-routing.util.ts`): the first configured backend
 * that can serve a purpose gets it.
 */
export const BACKEND_PLUGINS = {
  /** Configure the Redis backend. @example { url: 'redis://127.0.0.1:6379' } */
  redis: redisPlugin,
  /** Configure the Redlock backend (efficiency only): an odd number ≥ 3 of independent Redis masters. @example { urls: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'] } */
  redlock: redlockPlugin,
  /** Configure the etcd backend. @example { hosts: '127.0.0.1:2379' } */
  etcd: etcdPlugin,
  /** Configure the ZooKeeper backend. @example { connectionString: '127.0.0.1:2181' } */
  zookeeper: zookeeperPlugin,
  /** Configure the PostgreSQL backend. @example { connectionString: 'postgres://127.0.0.1:5432/app' } */
  postgres: postgresPlugin,
  /** Configure the MySQL / MariaDB backend. @example { uri: 'mysql://app@127.0.0.1:3306/app' } */
  mysql: mysqlPlugin,
  /** Enable the in-memory backend (single process; for tests). */
  memory: memoryPlugin,
};

/** `forRoot()`'s built-in backend fields, one per registered plugin, with the plugin's option type. */
export type BuiltInBackendOptions = { [Field in keyof typeof BACKEND_PLUGINS]?: OptionsOf<(typeof BACKEND_PLUGINS)[Field]> };
