import { createHash } from 'node:crypto';
import type { RedisClientLike } from './redis-client.interface.js';

/** A Lua script and its SHA-1, as `EVALSHA` names it. */
export interface RedisScript {
  readonly lua: string;
  readonly sha: string;
}

export const redisScript = (lua: string): RedisScript => ({ lua, sha: createHash('sha1').update(lua).digest('hex') });

/**
 * Run `script` by its SHA (one round trip, no script text on the wire); on `NOSCRIPT` (a server
 * restarted, failed over, or `SCRIPT FLUSH`ed) send the text once with `EVAL`, which caches it
 * again. Used by the lock backend and by `RedisFence`.
 */
export async function runScript(client: RedisClientLike, script: RedisScript, keys: string[], args: (string | number)[]): Promise<unknown> {
  try {
    return await client.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (error) {
    if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error;
    return client.eval(script.lua, keys.length, ...keys, ...args);
  }
}
