import type { BackendPlugin } from '../backend-plugin.interface.js';
import { resolveZooKeeperOptions, ZOOKEEPER_CAPABILITIES, type ResolvedZooKeeperOptions, type ZooKeeperBackendOptions } from './zookeeper-backend.options.js';
import { zooKeeperConnector } from './zookeeper-client.factory.js';
import { ZooKeeperBackend } from './zookeeper.backend.js';

/** `forRoot({ zookeeper })`. The module's own client connects on first use (and again after a lost session). */
export const zookeeperPlugin: BackendPlugin<ZooKeeperBackendOptions, ResolvedZooKeeperOptions> = {
  capabilities: ZOOKEEPER_CAPABILITIES,
  resolve: resolveZooKeeperOptions,
  async create(o, name, { driftFactor }) {
    const common = { name, prefix: o.prefix, commandTimeoutMs: o.commandTimeoutMs, driftFactor };
    if (o.client) return new ZooKeeperBackend({ ...common, client: o.client, ownsClient: false });
    return new ZooKeeperBackend({ ...common, ownsClient: true, reconnect: await zooKeeperConnector(o, name) });
  },
};
