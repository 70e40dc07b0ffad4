import type { BackendPlugin } from '../backend-plugin.interface.js';
import { ownedClient } from '../owned-client.util.js';
import { REDIS_CAPABILITIES, resolveRedisOptions, type RedisBackendOptions, type ResolvedRedisOptions } from './redis-backend.options.js';
import { createRedisClient } from './redis-client.factory.js';
import { RedisBackend } from './redis.backend.js';

/** `forRoot({ redis })`. */
export const redisPlugin: BackendPlugin<RedisBackendOptions, ResolvedRedisOptions> = {
  capabilities: REDIS_CAPABILITIES,
  resolve: resolveRedisOptions,
  async create(o, name, { log }) {
    return new RedisBackend({
      name,
      ...(await ownedClient(o.client, () => createRedisClient(o, name))),
      keyPrefix: o.keyPrefix,
      connectTimeoutMs: o.connectTimeoutMs,
      commandTimeoutMs: o.commandTimeoutMs,
      log,
    });
  },
};
