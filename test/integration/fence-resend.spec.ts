import { Etcd3 } from 'etcd3';
import { Redis } from 'ioredis';
import { EtcdFence, RedisFence, StaleFencingTokenError } from '../../lib/index.js';
import { etcdHosts, redisUrl, uniqueKey } from '../harness/lock-app.js';

// A client resends a request whose answer was lost: etcd3 retries a txn on another member when
// one dies after applying it, ioredis resends unanswered commands after a reconnect. Found by the
// seeded simulation (seed 2): the first copy of a fenced write was applied, another holder's read
// raised the fence, and the resent copy answered "stale" — the caller was told nothing changed
// while its value was in the store. Here the resend is made by hand: the same request twice, the
// fence raised in between.

describe('fenced writes resent after a lost answer', () => {
  it('EtcdFence: reported applied when its first copy was; a write never applied is still refused', async () => {
    const etcd = new Etcd3({ hosts: etcdHosts() });
    try {
      const fence = new EtcdFence(etcd);
      const key = uniqueKey('etcd-resend');
      await fence.write(key, 'v1', 10n);
      let sends = 0;
      const resending = {
        kv: {
          txn: async (request: unknown, options?: unknown) => {
            if (sends++ === 0) {
              await etcd.kv.txn(request as never, options as never); // applied, answer lost
              await fence.read(key, 20n); // the next holder reads: the fence rises
            }
            return etcd.kv.txn(request as never, options as never);
          },
          range: (request: unknown, options?: unknown) => etcd.kv.range(request as never, options as never),
          deleteRange: (request: unknown, options?: unknown) => etcd.kv.deleteRange(request as never, options as never),
        },
        lease: (ttl: number, options?: { autoKeepAlive?: boolean; deadline?: Date }) => etcd.lease(ttl, options),
        watch: () => etcd.watch(),
        close: () => etcd.close(),
      };
      await expect(new EtcdFence(resending as never).write(key, 'v2', 15n)).resolves.toBeUndefined();
      expect(await fence.read(key, 20n)).toBe('v2');
      await expect(fence.write(key, 'v3', 15n)).rejects.toBeInstanceOf(StaleFencingTokenError);
      expect(await fence.read(key, 20n)).toBe('v2');
    } finally {
      etcd.close();
    }
  });

  it('RedisFence: reported applied when its first copy was; a write never applied is still refused', async () => {
    const redis = new Redis(redisUrl());
    try {
      const fence = new RedisFence(redis);
      const key = uniqueKey('redis-resend');
      await fence.write(key, 'v1', 10n);
      let sends = 0;
      const resending = new Proxy(redis, {
        get(target, property, receiver) {
          if (property !== 'evalsha' && property !== 'eval') return Reflect.get(target, property, receiver);
          return async (...args: unknown[]) => {
            const send = (): Promise<unknown> => (target[property] as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            if (sends++ === 0) {
              await send(); // applied, answer lost
              await fence.read(key, 20n); // the next holder reads: the fence rises
            }
            return send();
          };
        },
      });
      await expect(new RedisFence(resending).write(key, 'v2', 15n)).resolves.toBeUndefined();
      expect(await fence.read(key, 20n)).toBe('v2');
      await expect(fence.write(key, 'v3', 15n)).rejects.toBeInstanceOf(StaleFencingTokenError);
      expect(await fence.read(key, 20n)).toBe('v2');
    } finally {
      redis.disconnect();
    }
  });
});
