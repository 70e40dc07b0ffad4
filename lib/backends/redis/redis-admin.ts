import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { HeldLock } from '../lock-backend.interface.js';
import type { RedisClientLike } from './redis-client.interface.js';
import type { RedisCommands } from './redis-commands.js';
import type { RedisKeys } from './redis-keys.util.js';
import { FORCE_RELEASE, INSPECT } from './redis.scripts.js';

/** What an operator's view reads and does through the backend. */
export interface RedisAdminParts {
  readonly name: string;
  readonly client: RedisClientLike;
  /** The key prefix every lock key starts with. */
  readonly prefix: string;
  /** The wake channel a forced release publishes on. */
  readonly channel: string;
  readonly entryLifeMs: number;
  readonly commands: RedisCommands;
  readonly keys: RedisKeys;
}

/**
 * An operator's view of one Redis backend's keys: `inspect()`, `listKeys()` and `forceRelease()`,
 * read from the server (any process's holds, not only this one's).
 */
export class RedisAdmin {
  constructor(private readonly redis: RedisAdminParts) {}

  async inspect(key: string): Promise<HeldLock | null> {
    const reply = (await this.redis.commands.call('inspect', key, () => this.redis.commands.script(INSPECT, this.redis.keys.all(key), []))) as
      | [string, number, number]
      | [string, number, number, number, number]
      | [];
    if (reply.length === 0) return null;
    const held = { remainingMs: Math.max(0, Number(reply[1])), waiters: Number(reply[2]) };
    // A plain lock's holder: the engine reports more of it (how long it has held) when it holds here.
    return reply.length === 5 ? { ...held, permits: Number(reply[3]), holders: Number(reply[4]) } : { ...held, owner: reply[0] };
  }

  /**
   * `SCAN` (never `KEYS`: it would block the server) under the key prefix, on every master of a
   * Cluster, keeping lock keys only: they end in `}`, their queues and a semaphore's keys in a
   * `:suffix`. Each `SCAN` is one bounded call; at most `max` names.
   */
  async listKeys(prefix: string, max: number): Promise<string[]> {
    const { client } = this.redis;
    const names = new Set<string>();
    const nodes = client.isCluster && client.nodes ? client.nodes('master') : [client];
    // ioredis drops a Cluster's nodes while it cannot reach it: nothing to SCAN is not "nothing held".
    if (nodes.length === 0) throw new LockBackendUnavailableError(this.redis.name, 'listKeys', 'no Cluster master is known (the cluster cannot be reached)');
    for (const node of nodes) {
      // ioredis' own keyPrefix option namespaces every key it sends, but not SCAN's pattern, and SCAN answers stored names.
      const namespace = node.options?.keyPrefix || client.options?.keyPrefix || '';
      const pattern = `${globEscape(namespace + this.redis.prefix)}*`;
      let cursor = '0';
      do {
        const [next, batch] = await this.redis.commands.call('listKeys', prefix, () => node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000));
        cursor = next;
        for (const stored of batch) {
          if (!stored.startsWith(namespace)) continue;
          const key = this.userKeyOf(stored.slice(namespace.length));
          if (key !== undefined && key.startsWith(prefix)) names.add(key);
          if (names.size >= max) return [...names];
        }
      } while (cursor !== '0');
    }
    return [...names];
  }

  /** The holder's process hears it on the wake channel, else at its next renewal or validity end. */
  async forceRelease(key: string): Promise<string | undefined> {
    const holder = await this.redis.commands.call('forceRelease', key, () => this.redis.commands.script(FORCE_RELEASE, this.redis.keys.all(key), [this.redis.entryLifeMs, this.redis.channel]));
    return typeof holder === 'string' ? holder : undefined;
  }

  /** The user's key of a lock key (lockKeyOf() undone); undefined for any other name under the prefix. */
  private userKeyOf(name: string): string | undefined {
    const { prefix } = this.redis;
    if (!name.startsWith(prefix) || !name.endsWith('}')) return undefined;
    const rest = name.slice(prefix.length, -1);
    const key = rest.startsWith('{') ? rest.slice(1) : rest.startsWith('%{') ? rest.slice(2).replaceAll('%7D', '}').replaceAll('%25', '%') : undefined;
    // Only the name the backend itself would give that key: a hand-made second spelling is not a lock.
    return key !== undefined && this.redis.keys.lock(key) === name ? key : undefined;
  }
}

/** `pattern` matched literally by `SCAN MATCH` (its glob characters escaped). */
function globEscape(pattern: string): string {
  return pattern.replace(/[\\*?[\]]/g, '\\$&');
}
