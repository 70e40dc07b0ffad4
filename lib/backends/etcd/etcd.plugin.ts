import type { BackendPlugin } from '../backend-plugin.interface.js';
import { ownedClient } from '../owned-client.util.js';
import { ETCD_CAPABILITIES, resolveEtcdOptions, type EtcdBackendOptions, type ResolvedEtcdOptions } from './etcd-backend.options.js';
import { createEtcdClient } from './etcd-client.factory.js';
import { EtcdBackend } from './etcd.backend.js';

/** `forRoot({ etcd })`. */
export const etcdPlugin: BackendPlugin<EtcdBackendOptions, ResolvedEtcdOptions> = {
  capabilities: ETCD_CAPABILITIES,
  resolve: resolveEtcdOptions,
  async create(o, name, { driftFactor }) {
    return new EtcdBackend({
      name,
      ...(await ownedClient(o.client, () => createEtcdClient(o, name))),
      prefix: o.prefix,
      sessionTtlSeconds: o.sessionTtlSeconds,
      commandTimeoutMs: o.commandTimeoutMs,
      driftFactor,
    });
  },
};
