import { Redis } from 'ioredis';
import { RedisBackend } from '../../lib/backends/redis/redis.backend.js';
import { redisUrl, uniqueKey } from '../harness/lock-app.js';

// Issue 35: commands of many callers at once leave the socket a few at a time — batched (each
// socket write costs the client more than the command it carries) but bounded (one write of
// everything made client and server wait for each other in turn: 0.49× the floor on 16 × 1,000
// keys against 0.84× with batches of 4–8).
interface Recorded {
  /** Commands per socket write, in order. */
  readonly writes: number[];
  /** The name of every command written, in order. */
  readonly names: string[];
  stop(): void;
}

/** Count the commands in each write the client's socket makes (RESP: one `*` array header per command). */
function recordWrites(client: Redis): Recorded {
  const stream = (client as unknown as { stream: { _write: Function; _writev: Function } }).stream;
  const writes: number[] = [];
  const names: string[] = [];
  const commandsIn = (chunk: unknown): number => {
    for (const m of String(chunk).matchAll(/(?:^|\r\n)\*\d+\r\n\$\d+\r\n(\w+)/g)) names.push(m[1].toLowerCase());
    return (String(chunk).match(/(^|\r\n)\*\d+\r\n\$/g) ?? []).length;
  };
  const { _write: write, _writev: writev } = stream;
  stream._write = function (chunk: unknown, ...rest: unknown[]) {
    writes.push(commandsIn(chunk));
    return write.call(this, chunk, ...rest);
  };
  stream._writev = function (chunks: Array<{ chunk: unknown }>, ...rest: unknown[]) {
    writes.push(chunks.reduce((n, { chunk }) => n + commandsIn(chunk), 0));
    return writev.call(this, chunks, ...rest);
  };
  return {
    writes,
    names,
    stop: () => {
      stream._write = write;
      stream._writev = writev;
    },
  };
}

describe('Redis: the commands of many callers at once', () => {
  let client: Redis;
  let backend: RedisBackend;

  beforeAll(async () => {
    client = new Redis(redisUrl());
    backend = new RedisBackend({ client, ownsClient: true });
    // Connected, the scripts loaded and the wake-up subscriber open: only the burst is recorded.
    const warm = uniqueKey('batches-warm');
    expect((await backend.acquire({ key: warm, owner: 'w', ttlMs: 5_000, queue: true })).acquired).toBe(true);
    await backend.release(warm, 'w');
  });
  afterAll(async () => {
    await backend.close();
  });

  it('leave in writes of at most 6 commands, several commands a write', async () => {
    const callers = 48;
    const keys = Array.from({ length: callers }, (_, i) => uniqueKey(`batches-${i}`));
    const recorded = recordWrites(client);
    let granted: boolean[];
    try {
      granted = (await Promise.all(keys.map((key, i) => backend.acquire({ key, owner: `o${i}`, ttlMs: 5_000, queue: true })))).map((r) => r.acquired);
    } finally {
      recorded.stop();
    }
    expect(granted).toEqual(keys.map(() => true));
    const { writes } = recorded;
    expect(writes.reduce((n, c) => n + c, 0)).toBe(callers);
    expect(Math.max(...writes)).toBeLessThanOrEqual(6);
    // The first caller finds nothing in flight and writes at once; the other 47 share writes.
    expect(writes.length).toBeLessThanOrEqual(1 + Math.ceil((callers - 1) / 6));
    for (const [i, key] of keys.entries()) await backend.release(key, `o${i}`);
  });

  it('a key found free through the queue is tried with a plain SET NX again (one command, not the queue script)', async () => {
    const key = uniqueKey('batches-busy-then-free');
    const request = (owner: string) => ({ key, owner, ttlMs: 5_000, queue: true });
    expect((await backend.acquire(request('a'))).acquired).toBe(true);
    // b finds it busy and queues; it leaves, a releases: the key is free, and known busy a moment ago.
    expect((await backend.acquire(request('b'))).acquired).toBe(false);
    await backend.release(key, 'b');
    await backend.release(key, 'a');
    const recorded = recordWrites(client);
    try {
      // Busy a moment ago: c goes to the queue script at once, which finds it free and takes it.
      expect((await backend.acquire(request('c'))).acquired).toBe(true);
      await backend.release(key, 'c');
      const sentForC = recorded.names.length;
      expect(await backend.acquire(request('d'))).toEqual({ acquired: true });
      expect(recorded.names.slice(sentForC)).toEqual(['set']);
      await backend.release(key, 'd');
    } finally {
      recorded.stop();
    }
  });
});
