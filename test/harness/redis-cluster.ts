import { Redis } from 'ioredis';
import { sleep } from './lock-app.js';
import { RedisServer } from './servers.mjs';

/** A Redis Cluster of `masters` servers of the spec's own, the 16384 slots split evenly between them. */
export interface RedisClusterServers {
  servers: RedisServer[];
  nodes: Array<{ host: string; port: number }>;
  stop(): Promise<void>;
}

export async function startRedisCluster(masters = 3): Promise<RedisClusterServers> {
  const servers = await Promise.all(Array.from({ length: masters }, () => RedisServer.start({ cluster: true })));
  const admins = servers.map((s) => new Redis(s.url, { lazyConnect: false }));
  try {
    const per = Math.ceil(16384 / masters);
    await Promise.all(admins.map((admin, i) => admin.call('CLUSTER', 'ADDSLOTSRANGE', String(i * per), String(Math.min(16383, (i + 1) * per - 1)))));
    for (const other of servers.slice(1)) await admins[0]!.call('CLUSTER', 'MEET', '127.0.0.1', String(other.port), String(other.busPort));
    // Every node must know every other and call the cluster ok before a client routes by its slots.
    const ready = async (): Promise<boolean> => {
      for (const admin of admins) {
        const info = String(await admin.call('CLUSTER', 'INFO'));
        if (!info.includes('cluster_state:ok') || !info.includes(`cluster_known_nodes:${masters}`)) return false;
      }
      return true;
    };
    for (let i = 0; i < 400 && !(await ready()); i++) await sleep(25);
    if (!(await ready())) throw new Error(`a ${masters}-master Redis Cluster did not become ok within 10 s`);
  } catch (error) {
    await Promise.all(servers.map((s) => s.stop()));
    throw error;
  } finally {
    for (const admin of admins) admin.disconnect();
  }
  return {
    servers,
    nodes: servers.map((s) => ({ host: '127.0.0.1', port: s.port })),
    stop: async () => void (await Promise.all(servers.map((s) => s.stop()))),
  };
}
