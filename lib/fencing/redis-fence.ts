import { randomBytes } from 'node:crypto';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { StaleFencingTokenError } from '../errors/stale-fencing-token.error.js';
import type { RedisClientLike } from '../backends/redis/redis-client.interface.js';
import { checkRedisClient, type RedisClientInput } from '../backends/redis/redis-client.check.js';
import { checkResourceKey, fenceToken, hasLeaseOn, type LeaseSource } from './fence-token.util.js';
import { runScript, type RedisScript } from '../backends/redis/redis-script.loader.js';
import { FENCED_READ, FENCED_WRITE } from './redis-fence.scripts.js';

export interface RedisFenceOptions {
  /** Prefix of the resource keys. @default 'fence:' */
  keyPrefix?: string;
  /** Supplies the token when a call passes none: the service (`leases: locks`). */
  leases?: LeaseSource;
  /**
   * The lock key that protects a resource key, for implicit tokens: the token is taken only from
   * the lease on that key. @default the resource key itself
   */
  lockKey?: (key: string) => string;
}

/**
 * A fenced store on a Redis the application owns — the resource side of a `correctness` lock
 * (Kleppmann's fencing). Every key keeps a fence: the highest token any fenced read or write
 * has shown it. An operation with a lower token throws `StaleFencingTokenError` and changes
 * nothing, so a holder that was paused past its lease cannot overwrite its successor's work.
 *
 * Read-modify-write must read through the fence too: `read(key, token)` raises the fence, so a
 * superseded holder's later write is refused instead of silently erasing the newer holder's update.
 *
 * @example
 * const fence = new RedisFence(redis, { leases: locks });
 * await locks.using(`account:${id}`, { purpose: 'correctness' }, async () => {
 *   const balance = Number(await fence.read(`account:${id}`)); // token from the current lease
 *   await fence.write(`account:${id}`, String(balance - amount));
 * });
 */
export class RedisFence {
  private readonly prefix: string;
  private readonly client: RedisClientLike;

  /** `client`: ioredis or iovalkey `Redis`/`Cluster`, or a connected node-redis client. */
  constructor(
    client: RedisClientInput,
    private readonly options: RedisFenceOptions = {},
  ) {
    this.client = checkRedisClient(client, 'client', 'new RedisFence()');
    this.prefix = options.keyPrefix ?? 'fence:';
  }

  /** Store `value` if `token` (default: the current lease's) is not older than the key's fence. */
  async write(key: string, value: string, token?: bigint | number): Promise<void> {
    const where = `RedisFence.write(${JSON.stringify(key)})`;
    checkResourceKey(key, where);
    if (typeof value !== 'string') throw new InvalidLockOptionsError('value', 'must be a string (serialize it first)', where);
    const fenced = fenceToken(token, this.options.leases, where, this.lockKeyOf(key));
    const reply = (await this.eval(FENCED_WRITE, key, [fenced.toString(), value, randomBytes(12).toString('base64url')])) as [number, string?];
    if (reply[0] !== 1) throw new StaleFencingTokenError(key, fenced, BigInt(reply[1]!));
  }

  /**
   * Read the value. With a token (given, or from the lease on the resource's lock key) the read is
   * fenced: a stale token throws, a newer one raises the fence. With neither, a plain unfenced read.
   */
  async read(key: string, token?: bigint | number): Promise<string | null> {
    const where = `RedisFence.read(${JSON.stringify(key)})`;
    checkResourceKey(key, where);
    if (token === undefined && !hasLeaseOn(this.options.leases, this.lockKeyOf(key))) {
      return (await this.client.eval("return redis.call('HGET', KEYS[1], 'v')", 1, this.prefix + key)) as string | null;
    }
    const fenced = fenceToken(token, this.options.leases, where, this.lockKeyOf(key));
    const reply = (await this.eval(FENCED_READ, key, [fenced.toString()])) as [number, string | null];
    if (reply[0] !== 1) throw new StaleFencingTokenError(key, fenced, BigInt(reply[1]!));
    return reply[1] ?? null;
  }

  /** The key's fence (highest token seen), or undefined if no fenced operation touched it. */
  async fence(key: string): Promise<bigint | undefined> {
    checkResourceKey(key, `RedisFence.fence(${JSON.stringify(key)})`);
    const fence = (await this.client.eval("return redis.call('HGET', KEYS[1], 'f')", 1, this.prefix + key)) as string | null;
    return fence === null ? undefined : BigInt(fence);
  }

  private lockKeyOf(key: string): string {
    return this.options.lockKey ? this.options.lockKey(key) : key;
  }

  private eval(script: RedisScript, key: string, args: string[]): Promise<unknown> {
    return runScript(this.client, script, [this.prefix + key], args);
  }
}
