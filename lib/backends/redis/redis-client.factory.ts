import { MODULE_OPTIONS } from '../../common/checks.util.js';
import { redactUrl, scrubCredentials } from '../../common/redact.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { ResolvedRedisOptions } from './redis-backend.options.js';
import type { RedisClientLike } from './redis-client.interface.js';

/** Open the client `forRoot({ redis: { url | options } })` asks for (ioredis is loaded only here). */
export async function createRedisClient(o: ResolvedRedisOptions, field: string): Promise<RedisClientLike> {
  let ioredis: { Redis: new (...args: any[]) => RedisClientLike };
  try {
    ioredis = (await import('ioredis')) as unknown as typeof ioredis;
  } catch (error) {
    throw new InvalidLockOptionsError(field, `needs the ioredis package (npm install ioredis): ${(error as Error).message}`, MODULE_OPTIONS);
  }
  const options = { connectTimeout: o.connectTimeoutMs, ...o.options };
  let client: RedisClientLike;
  try {
    client = o.url ? new ioredis.Redis(o.url, options) : new ioredis.Redis(options);
  } catch (error) {
    // Never rethrow ioredis' own error: a URL parse failure carries the whole URL (password
    // included) as `input`, and inspecting or logging the error would print it.
    throw new InvalidLockOptionsError(
      o.url ? `${field}.url` : `${field}.options`,
      `ioredis refused it: ${scrubCredentials((error as Error)?.message ?? String(error))}${o.url ? ` (${redactUrl(o.url)})` : ''}`,
      MODULE_OPTIONS,
    );
  }
  // Without a listener ioredis prints every reconnect attempt; operations report outages themselves.
  client.on('error', () => undefined);
  return client;
}
