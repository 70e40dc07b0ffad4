import type { BackendPlugin } from '../backend-plugin.interface.js';
import { createRedisClient } from '../redis/redis-client.factory.js';
import type { RedisClientLike } from '../redis/redis-client.interface.js';
import { REDLOCK_CAPABILITIES, resolveRedlockOptions, type RedlockBackendOptions, type ResolvedRedlockOptions } from './redlock-backend.options.js';
import { RedlockBackend } from './redlock.backend.js';

/** `forRoot({ redlock })`. */
export const redlockPlugin: BackendPlugin<RedlockBackendOptions, ResolvedRedlockOptions> = {
  capabilities: REDLOCK_CAPABILITIES,
  resolve: resolveRedlockOptions,
  async create(o, name, { log }) {
    const owns = o.clients === undefined;
    const clients: RedisClientLike[] = owns
      ? await Promise.all(
          o.urls!.map((url, i) =>
            createRedisClient({ url, options: o.options, keyPrefix: o.keyPrefix, connectTimeoutMs: o.connectTimeoutMs, commandTimeoutMs: o.nodeTimeoutMs }, `${name}.urls[${i}]`),
          ),
        )
      : o.clients!;
    return new RedlockBackend({ name, clients, ownsClients: owns, keyPrefix: o.keyPrefix, nodeTimeoutMs: o.nodeTimeoutMs, retryDelayMs: o.retryDelayMs, log });
  },
};
