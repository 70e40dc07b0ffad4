import { failOption, MODULE_OPTIONS } from '../../common/checks.util.js';
import { describeValue } from '../../common/redact.util.js';
import type { RedisClientLike } from './redis-client.interface.js';
import { NodeRedisClient, nodeRedisKind, type NodeRedisLike } from './node-redis-client.js';

/** A Redis client the application passes: ioredis or iovalkey (`Redis`, `Cluster`), or node-redis (`createClient`, `createCluster`, `createSentinel`). */
export type RedisClientInput = RedisClientLike | NodeRedisLike;

const KINDS = 'an ioredis or iovalkey Redis or Cluster, or a node-redis client (createClient, createCluster or createSentinel of the redis package)';

/**
 * The application's Redis client, checked and seen as `RedisClientLike` (node-redis wrapped, once).
 * Refused, naming `field`: anything else, a client already closed, and a node-redis client not
 * connected yet (node-redis sends nothing before `connect()`: every lock would wait its
 * `connectTimeoutMs` and fail).
 */
export function checkRedisClient(client: unknown, field: string, where = MODULE_OPTIONS): RedisClientLike {
  if (client instanceof NodeRedisClient) return client;
  const kind = nodeRedisKind(client);
  if (kind) {
    const raw = client as NodeRedisLike;
    if (!raw.isOpen) {
      // A Cluster has no socketEpoch: closed or never connected cannot be told apart there.
      const closed = typeof raw.socketEpoch === 'number' ? raw.socketEpoch > 0 : undefined;
      failOption(
        field,
        closed === true
          ? 'is a node-redis client that was closed: pass an open one'
          : closed === false
            ? 'is a node-redis client that is not connected: await client.connect() before the module starts (in forRootAsync({ useFactory }), say)'
            : 'is a node-redis client that is not open (not connected yet, or closed): pass one you have connected (await client.connect()) and not closed',
        where,
      );
    }
    return new NodeRedisClient(raw, kind);
  }
  const c = client as Record<string, unknown> | null;
  if (typeof c !== 'object' || c === null) return failOption(field, `must be ${KINDS}, got ${describeValue(client)}`, where);
  for (const method of ['set', 'evalsha', 'eval', 'duplicate'] as const) {
    if (typeof c[method] !== 'function') failOption(field, `must be ${KINDS} (no ${method}())`, where);
  }
  if (typeof c.status !== 'string') failOption(field, `must be ${KINDS} (no status)`, where);
  // A Cluster the application disconnect()ed settles at 'close', not 'end' (ioredis 5 and 6): its
  // manuallyClosing flag tells it from one between two connections.
  const closing = c.manuallyClosing === true && (c.status === 'close' || c.status === 'disconnecting');
  if (c.status === 'end' || closing) failOption(field, 'is a Redis client that was closed (quit() or disconnect()): pass an open one', where);
  return client as RedisClientLike;
}
