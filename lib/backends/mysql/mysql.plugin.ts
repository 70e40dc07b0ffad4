import type { BackendPlugin } from '../backend-plugin.interface.js';
import { ownedClient } from '../owned-client.util.js';
import { MYSQL_CAPABILITIES, resolveMySqlOptions, type MySqlBackendOptions, type ResolvedMySqlOptions } from './mysql-backend.options.js';
import { createMySqlPool } from './mysql-client.factory.js';
import { MySqlBackend } from './mysql.backend.js';

/** `forRoot({ mysql })`. */
export const mysqlPlugin: BackendPlugin<MySqlBackendOptions, ResolvedMySqlOptions> = {
  capabilities: MYSQL_CAPABILITIES,
  resolve: resolveMySqlOptions,
  async create(o, name, context) {
    const { client: pool, ownsClient: ownsPool } = await ownedClient(o.pool, () => createMySqlPool(o, name));
    const backend = new MySqlBackend({
      name,
      pool,
      ownsPool,
      tablePrefix: o.tablePrefix,
      connectTimeoutMs: o.connectTimeoutMs,
      commandTimeoutMs: o.commandTimeoutMs,
      log: context.log,
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
