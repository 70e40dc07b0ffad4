import { createClient, createCluster, createSentinel } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import { Redis as Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { DistributedLockModule, RedisFence } from '../../lib/index.js';

// Compiled by npm test's type-check, never run: each client kind passes where the module takes a client, without a cast.
export async function typesOnly(): Promise<void> {
  const client = await createClient().connect();
  DistributedLockModule.forRoot({ redis: { client } });
  DistributedLockModule.forRoot({ redis: { client: await createClient({ RESP: 2 }).connect() } });
  DistributedLockModule.forRoot({ redis: { client: await createCluster({ rootNodes: [] }).connect() } });
  DistributedLockModule.forRoot({ redis: { client: await createSentinel({ name: 'mymaster', sentinelRootNodes: [] }).connect() } });
  DistributedLockModule.forRoot({ redis: { client: await createClient5().connect() } });
  DistributedLockModule.forRoot({ redis: { client: await createCluster5({ rootNodes: [] }).connect() } });
  DistributedLockModule.forRoot({ redis: { client: new Valkey() } });
  DistributedLockModule.forRoot({ redis: { client: new ValkeyCluster([]) } });
  DistributedLockModule.forRoot({ redlock: { clients: [client, await createClient5().connect(), new Valkey()] } });
  new RedisFence(client);
  new RedisFence(new Valkey());
}
