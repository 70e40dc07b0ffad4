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
