import type { BackendPlugin } from '../backend-plugin.interface.js';
import { ownedClient } from '../owned-client.util.js';
import { POSTGRES_CAPABILITIES, resolvePostgresOptions, type PostgresBackendOptions, type ResolvedPostgresOptions } from './postgres-backend.options.js';
import { createPostgresPool } from './postgres-client.factory.js';
import { PostgresBackend } from './postgres.backend.js';

/** `forRoot({ postgres })`. */
export const postgresPlugin: BackendPlugin<PostgresBackendOptions, ResolvedPostgresOptions> = {
  capabilities: POSTGRES_CAPABILITIES,
  resolve: resolvePostgresOptions,
  async create(o, name) {
    const { client: pool, ownsClient: ownsPool } = await ownedClient(o.pool, () => createPostgresPool(o, name));
    const backend = new PostgresBackend({
      name,
      pool,
      ownsPool,
      schema: o.schema,
      tablePrefix: o.tablePrefix,
      connectTimeoutMs: o.connectTimeoutMs,
      commandTimeoutMs: o.commandTimeoutMs,
    });
    try {
      await backend.start();
    } catch (error) {
      await backend.close().catch(() => undefined);
      throw error;
    }
    return backend;
  },
};
