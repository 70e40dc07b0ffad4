import type { LockBackend } from '../../backends/lock-backend.interface.js';
import type { ConformanceCheck } from './conformance-check.js';
import { CheckFailure, expect, sleep, within } from './conformance-context.js';

const has = (member: keyof LockBackend) => (backend: LockBackend): string | undefined => (backend[member] ? undefined : `no ${member}()`);

/** `inspect()`, `listKeys()` and `forceRelease()`: what an operator sees and does. */
export const ADMIN_CHECKS: readonly ConformanceCheck[] = [
  {
    name: 'inspect-reports-holds',
    about: "inspect() from another instance: null for a free key; for a held one its remaining time (within the ttl unless the key rides a session), its waiters where fairQueue says so, and the holder's token on fencing backends",
    skipUnless: has('inspect'),
    async run(c) {
      const key = c.key();
      expect((await c.at(1).inspect!(key)) === null, 'inspect() of a key nobody ever held was not null');
      const holder = c.owner();
      const grant = await c.acquire(c.at(0), key, holder);
      expect(grant.acquired, 'a free key was not granted');
      const fairQueue = c.at(0).capabilities.fairQueue;
      if (fairQueue) expect(!(await c.acquire(c.at(2), key, c.owner(), { queue: true })).acquired, 'a held key was granted to a waiter');
      const held = await c.at(1).inspect!(key);
      expect(held !== null, 'inspect() of a held key was null');
      expect(held.remainingMs > 0 && Number.isFinite(held.remainingMs), `inspect() said ${held.remainingMs} ms remain of a held key`);
      // A key with its own expiry ends within the ttl; one riding a session (validUntil) lives as long as the session.
      if (!c.at(0).validUntil) expect(held.remainingMs <= c.ttlMs + 1_000, `inspect() said ${held.remainingMs} ms remain of a ${c.ttlMs} ms ttl`);
      if (fairQueue) expect(held.waiters >= 1, `inspect() counted ${held.waiters} waiters with one queued`);
      if (c.at(0).capabilities.fencing) {
        expect(held.token === grant.token, `inspect() from another instance reported token ${held.token ?? 'none'}; the holder's is ${grant.token}`);
      }
      expect(await c.at(0).release(key, holder), 'release() by the holder answered false');
    },
  },
  {
    name: 'list-keys',
    about: 'listKeys(prefix) names the held keys under the prefix, each once, at most max, and none of the backend\'s own bookkeeping',
    skipUnless: has('listKeys'),
    async run(c) {
      const prefix = c.key('list');
      const keys = ['a', 'b', 'c', 'd'].map((name) => c.adopt(`${prefix}/${name}`));
      for (let i = 0; i < keys.length; i++) {
        const fair = c.at(i).capabilities.fairQueue;
        expect((await c.acquire(c.at(i), keys[i], c.owner())).acquired, 'a free key was not granted');
        // Queue entries are bookkeeping: they must not show as names.
        if (fair) await c.acquire(c.at(i + 1), keys[i], c.owner(), { queue: true });
      }
      const outside = c.key('outside');
      await c.acquire(c.at(0), outside, c.owner());
      const listed = await c.at(1).listKeys!(prefix, 1_000);
      expect(new Set(listed).size === listed.length, `listKeys() named a key twice: ${JSON.stringify(listed)}`);
      for (const key of keys) expect(listed.includes(key), `listKeys() left out the held key ${JSON.stringify(key)}`);
      for (const name of listed) {
        expect(name.startsWith(prefix), `listKeys(${JSON.stringify(prefix)}) named ${JSON.stringify(name)}, outside the prefix`);
        expect(keys.includes(name), `listKeys() named ${JSON.stringify(name)}, which nobody locked (bookkeeping?)`);
      }
      const capped = await c.at(1).listKeys!(prefix, 2);
      expect(capped.length <= 2, `listKeys(prefix, 2) named ${capped.length} keys`);
    },
  },
  {
    name: 'force-release',
    about: "forceRelease() from another instance ends the hold and names its owner; the holder cannot extend it, is told where the backend reports loss, and the next token is larger",
    skipUnless: has('forceRelease'),
    async run(c) {
      const key = c.key();
      expect((await c.at(1).forceRelease!(key)) === undefined, 'forceRelease() of a free key named an owner');
      const holder = c.owner();
      let told: string | undefined;
      const stop = c.at(0).onLeaseLost?.((owner, _detail, reason) => {
        if (owner === holder) told = reason ?? 'session-lost';
      });
      try {
        const grant = await c.acquire(c.at(0), key, holder);
        expect(grant.acquired, 'a free key was not granted');
        expect((await c.at(1).forceRelease!(key)) === holder, 'forceRelease() did not name the holder it ended');
        const next = c.owner();
        const taken = await c.acquire(c.at(2), key, next);
        expect(taken.acquired, 'the key was not free after forceRelease()');
        if (c.at(0).capabilities.fencing) expect(taken.token! > grant.token!, `the next holder's token ${taken.token} is not larger than the force-released ${grant.token}`);
        expect((await c.at(0).extend(key, holder, c.ttlMs)) === false, 'the force-released holder could still extend()');
        expect(!(await c.acquire(c.at(1), key, c.owner())).acquired, "the force-released holder's extend() took the key back");
        if (stop) {
          const started = performance.now();
          while (told === undefined && performance.now() - started < c.wakeWithinMs * 2) await sleep(20);
          expect(told === 'force-released', told === undefined ? 'the holder\'s instance was never told of its loss (onLeaseLost)' : `the holder was told of its loss with reason ${told}, not force-released`);
        }
      } finally {
        if (typeof stop === 'function') stop();
      }
    },
  },
  {
    name: 'ping',
    about: 'ping() resolves while the server answers',
    skipUnless: has('ping'),
    async run(c) {
      await within(5_000, 'ping(2000)', c.at(0).ping!(2_000));
    },
  },
];

/** Raise a CheckFailure unless `error` is a LockBackendUnavailableError (by name: it may come from another copy of the package). */
export function expectUnavailable(error: unknown, operation: string): void {
  if (!(error instanceof Error) || error.name !== 'LockBackendUnavailableError') {
    throw new CheckFailure(`${operation} against an unreachable server ${error === undefined ? 'succeeded' : `rejected with ${String(error)}`}, not LockBackendUnavailableError`);
  }
}
