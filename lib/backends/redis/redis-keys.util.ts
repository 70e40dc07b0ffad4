import { checkPrefix } from '../../common/checks.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';

/**
 * The part of a Redis key that Cluster hashes: between the first `{` and the first `}` after it,
 * if that is not empty; otherwise the whole key (`undefined` here).
 */
export function redisHashTag(key: string): string | undefined {
  const open = key.indexOf('{');
  if (open < 0) return undefined;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : undefined;
}

/**
 * A key prefix whose first `{` is followed at once by `}` gives every key an empty hash tag, so
 * the keys of one lock would land in different Cluster slots (CROSSSLOT) whatever the lock key.
 */
export function checkRedisKeyPrefix(prefix: unknown, cluster: boolean, where: string, field = 'redis.keyPrefix'): string {
  const checked = checkPrefix(prefix, field, where);
  const open = checked.indexOf('{');
  if (cluster && open >= 0 && checked[open + 1] === '}') {
    throw new InvalidLockOptionsError(
      field,
      `its first "{" is followed by "}" (an empty hash tag), so on Redis Cluster a lock's keys would hash to different slots`,
      where,
    );
  }
  return checked;
}

/**
 * The layout of a lock's keys this version writes (see redis.scripts.ts). Its queue's name carries
 * it (`:q2`, `:q2a`); the lock key's name is the same in every layout, so two layouts never both hold a key.
 * Layout 1 (0.1.x) queued in `:q` and `:qa` (sorted sets).
 */
export const REDIS_LAYOUT = 2;

/**
 * The Redis keys of one lock under a prefix: `lock:{key}`, its queue `lock:{key}:q2` and its
 * waiters' refreshes `lock:{key}:q2a`, a semaphore's three beside them, and layout 1's queue
 * `lock:{key}:q` (only read, to refuse queueing beside it). The user key sits inside one `{…}` hash tag, so all of them share
 * a Cluster slot. Cluster hashes what lies between the first `{` and the first `}` after it, or the
 * whole name when that is empty: a key starting with `}` (`}a` → `lock:{}a}`) would leave the tag
 * empty and scatter its keys over several slots (CROSSSLOT). Such keys, and only they, use
 * `lock:%{…}` with `%` and `}` percent-encoded inside the tag: never empty, never a `}`, and never
 * equal to a plain layout (which has `{` right after the prefix), so distinct keys stay distinct.
 */
export class RedisKeys {
  private readonly prefixHasBrace: boolean;

  constructor(private readonly prefix: string) {
    this.prefixHasBrace = prefix.includes('{');
  }

  /** Without a `{` in the prefix, only an empty key or one starting with `}` needs the encoded form. */
  lock(key: string): string {
    const lock = `${this.prefix}{${key}}`;
    const plain = this.prefixHasBrace ? redisHashTag(lock) !== undefined : key.length > 0 && key.charCodeAt(0) !== 0x7d;
    return plain ? lock : `${this.prefix}%{${key.replaceAll('%', '%25').replaceAll('}', '%7D')}}`;
  }

  /** The lock key, its queue, and its waiters' refreshes. */
  plain(key: string): [lock: string, queue: string, refreshed: string] {
    const lock = this.lock(key);
    return [lock, `${lock}:q${REDIS_LAYOUT}`, `${lock}:q${REDIS_LAYOUT}a`];
  }

  /**
   * plain() and a semaphore's three keys beside them (its queue, its queue's liveness, its
   * permits), in the order the scripts read them (see redis-semaphore.scripts.ts). The holders of a
   * semaphore live at the lock key itself, so a plain `SET NX` fails on them.
   */
  all(key: string): string[] {
    const lock = this.lock(key);
    return [lock, `${lock}:q${REDIS_LAYOUT}`, `${lock}:q${REDIS_LAYOUT}a`, `${lock}:sq`, `${lock}:sqa`, `${lock}:sp`, `${lock}:q`];
  }
}

/**
 * A waiter of another layout is queued for `key` (an instance of an older version runs beside this
 * one): queueing beside it would split the line, each version handing the key on to its own.
 */
export function layoutMismatch(backend: string, key: string, found = 1): InvalidLockOptionsError {
  return new InvalidLockOptionsError(
    'keyPrefix',
    `"${key}" is awaited by an instance that keeps Redis keys in layout ${found} (nest-distributed-lock 0.1.x); ` +
      `this one keeps layout ${REDIS_LAYOUT}. Stop the instances of the older version before starting this one ` +
      `(the Redis backend's docs: "Changing the Redis key layout"), or give this one another keyPrefix (the two then do not exclude each other)`,
    `the "${backend}" backend`,
  );
}
