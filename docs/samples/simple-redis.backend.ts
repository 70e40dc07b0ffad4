// The sample of docs/backends/writing-a-backend.md: a whole LockBackend in one file, over one Redis with
// ioredis — the classic `SET NX PX` lock with owner-checked release and extend. It is compiled
// with the project and held to the conformance suite in `npm test`
// (test/conformance/sample-backend.spec.ts). An efficiency lock: no fencing tokens, no queue.
import { Redis } from 'ioredis';
import { LockBackendUnavailableError, type AcquireRequest, type AcquireResult, type HeldLock, type LockBackend, type LockBackendCapabilities } from 'nest-distributed-lock';

export interface SimpleRedisBackendOptions {
  /** `redis://host:port`: the backend opens this client and closes it in close(). */
  url?: string;
  /** A client the application owns instead (never closed here). */
  client?: Redis;
  /** Prefix of every key it writes. @default 'simple-lock:' */
  prefix?: string;
  /** How long one command may take, ms. @default 1000 */
  commandTimeoutMs?: number;
}

// Compare-and-act on the server: only the owner's value may be deleted or given more time.
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const EXTEND = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`;

/** How often a waiter looks again: this backend has no queue, so waiting is polling. */
const POLL_MS = 50;

export class SimpleRedisBackend implements LockBackend {
  readonly name = 'simple-redis';
  readonly capabilities: LockBackendCapabilities = { fencing: false, fairQueue: false, distributed: true };
  private readonly redis: Redis;
  private readonly ownsClient: boolean;
  private readonly prefix: string;
  private closed = false;

  constructor(options: SimpleRedisBackendOptions) {
    const timeout = options.commandTimeoutMs ?? 1_000;
    // Every command answered or failed within commandTimeout, and given up after one reconnect:
    // an unreachable server never holds a call (the engine's waits and validity rely on that).
    this.redis = options.client ?? new Redis(options.url ?? 'redis://127.0.0.1:6379', { commandTimeout: timeout, maxRetriesPerRequest: 1 });
    this.ownsClient = !options.client;
    this.prefix = options.prefix ?? 'simple-lock:';
  }

  async acquire({ key, owner, ttlMs }: AcquireRequest): Promise<AcquireResult> {
    const reply = await this.call('acquire', key, () => this.redis.set(this.prefix + key, owner, 'PX', ttlMs, 'NX'));
    return reply === 'OK' ? { acquired: true } : { acquired: false };
  }

  /** No queue: look again soon, or at once when the caller stops waiting. */
  waitForTurn(_key: string, _owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(done, Math.min(timeoutMs, POLL_MS));
      function done(): void {
        signal?.removeEventListener('abort', aborted);
        resolve();
      }
      function aborted(): void {
        clearTimeout(timer);
        reject(signal!.reason);
      }
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }

  async extend(key: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.call('extend', key, () => this.redis.eval(EXTEND, 1, this.prefix + key, owner, String(ttlMs)))) === 1;
  }

  async release(key: string, owner: string): Promise<boolean> {
    return (await this.call('release', key, () => this.redis.eval(RELEASE, 1, this.prefix + key, owner))) === 1;
  }

  async inspect(key: string): Promise<HeldLock | null> {
    const [owner, ttl] = await this.call('inspect', key, () => Promise.all([this.redis.get(this.prefix + key), this.redis.pttl(this.prefix + key)]));
    return owner === null || ttl <= 0 ? null : { owner, remainingMs: ttl, waiters: 0 };
  }

  /** SCAN, never KEYS: bounded work per round trip on a big keyspace. */
  async listKeys(prefix: string, max: number): Promise<string[]> {
    const found = new Set<string>();
    let cursor = '0';
    do {
      const [next, keys] = await this.call('listKeys', prefix, () => this.redis.scan(cursor, 'MATCH', `${escapeGlob(this.prefix + prefix)}*`, 'COUNT', 200));
      for (const k of keys) if (found.size < max) found.add(k.slice(this.prefix.length));
      cursor = next;
    } while (cursor !== '0' && found.size < max);
    return [...found];
  }

  async ping(timeoutMs: number): Promise<void> {
    await this.call('ping', 'ping', () => this.redis.ping(), timeoutMs);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.ownsClient) this.redis.disconnect();
  }

  /** Every call bounded, and any failure reported as the engine expects: LockBackendUnavailableError. */
  private async call<T>(operation: string, key: string, send: () => Promise<T>, timeoutMs?: number): Promise<T> {
    if (this.closed) throw new LockBackendUnavailableError(this.name, operation, 'the backend is closed', { key });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      if (timeoutMs !== undefined) timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([send(), timeout]);
    } catch (error) {
      throw new LockBackendUnavailableError(this.name, operation, (error as Error).message, { key, cause: error });
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A key may hold `*`, `?`, `[` or `\`: matched as themselves in SCAN's pattern. */
function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
