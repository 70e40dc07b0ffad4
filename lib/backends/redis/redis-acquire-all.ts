import type { AcquireResult } from '../lock-backend.interface.js';
import type { RedisCommands } from './redis-commands.js';
import { redisHashTag, type RedisKeys } from './redis-keys.util.js';
import { SET_ALL_NX } from './redis.scripts.js';

const GRANTED: AcquireResult = Object.freeze({ acquired: true });

/** What a multi-key try needs of its Redis backend. */
export interface RedisAcquireAllHost {
  readonly cluster: boolean;
  readonly keys: RedisKeys;
  readonly commands: RedisCommands;
  release(key: string, owner: string): Promise<boolean>;
  extend(key: string, owner: string, ttlMs: number): Promise<boolean>;
  /** A process's first grant must still check, once it listens, that no key was force-released meanwhile. */
  needsFirstGrantCheck(): boolean;
  firstGrant(key: string, owner: string): Promise<AcquireResult>;
}

/**
 * Several keys in one step, or none (a multi-key lease's first try): one script per slot group
 * — all of them on a standalone or Sentinel Redis; in a Cluster, the keys that share a hash tag
 * (`{order:42}:items`, `{order:42}:payment`) go together and the groups one after the other,
 * the ones taken given back if a later group is busy. Busy: nothing is left held, and the
 * multi-key lease goes on key by key through the queue.
 */
export async function acquireAllOnRedis(host: RedisAcquireAllHost, keys: readonly string[], owners: readonly string[], ttlMs: number): Promise<AcquireResult> {
  const { commands } = host;
  const locks = keys.map((key) => host.keys.lock(key));
  const groups = new Map<string, number[]>();
  keys.forEach((_, i) => {
    const slot = host.cluster ? (redisHashTag(locks[i]) ?? locks[i]) : '';
    groups.set(slot, [...(groups.get(slot) ?? []), i]);
  });
  const taken: number[] = [];
  const giveBack = (indexes: number[]): Promise<unknown> => Promise.all(indexes.map((i) => host.release(keys[i], owners[i]).catch(() => undefined)));
  const giveBackAll = async (indexes: number[]): Promise<boolean> => {
    const given = await Promise.allSettled(indexes.map((i) => host.release(keys[i], owners[i])));
    const failed = given.find((g): g is PromiseRejectedResult => g.status === 'rejected');
    if (failed) throw failed.reason;
    return true;
  };
  for (const group of groups.values()) {
    const reply = await commands
      .call(
        'acquire',
        keys[group[0]],
        () => commands.script(SET_ALL_NX, group.map((i) => locks[i]), [...group.map((i) => owners[i]), ttlMs]),
        // An answer that never came may still be applied: every key of the group is deleted behind
        // it — a give-back that failed fails the clean-up's try, so it is tried again.
        { owner: owners[group[0]], ttlMs, release: () => giveBackAll(group) },
      )
      .catch(async (error: unknown) => {
        await giveBack(taken);
        throw error;
      });
    if (reply !== 1) {
      await giveBack(taken);
      return { acquired: false };
    }
    taken.push(...group);
  }
  if (groups.size > 1) {
    // A Cluster's groups go one after another: a key of an earlier one may have been force-
    // released meanwhile. Ask (owner-checked, each its full ttl again) before calling it a grant.
    const last = new Set([...groups.values()].at(-1));
    const earlier = taken.filter((i) => !last.has(i));
    const kept = await Promise.all(earlier.map((i) => host.extend(keys[i], owners[i], ttlMs))).catch(async (error: unknown) => {
      await giveBack(taken);
      throw error;
    });
    if (!kept.every(Boolean)) {
      await giveBack(taken);
      return { acquired: false };
    }
  }
  if (!host.needsFirstGrantCheck()) return GRANTED;
  // A process's first grant: listen first, then check no key was force-released meanwhile.
  for (let i = 0; i < keys.length; i++) {
    if ((await host.firstGrant(keys[i], owners[i])).acquired) continue;
    await giveBack(taken);
    return { acquired: false };
  }
  return GRANTED;
}
