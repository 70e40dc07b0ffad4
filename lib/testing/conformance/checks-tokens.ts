import type { LockBackend } from '../../backends/lock-backend.interface.js';
import { withPermits } from '../../backends/semaphore.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import type { ConformanceCheck } from './conformance-check.js';
import { describeError, expect, outcome } from './conformance-context.js';

const fencing = (backend: LockBackend): string | undefined => (backend.capabilities.fencing ? undefined : 'capabilities.fencing is false');
const semaphores = (backend: LockBackend): string | undefined =>
  backend.capabilities.semaphore ? undefined : 'capabilities.semaphore is false';

function isPermitsError(error: unknown): boolean {
  return error instanceof InvalidLockOptionsError && error.field === 'permits';
}

/** Fencing tokens, semaphores and all-or-nothing multi-key grants. */
export const TOKEN_CHECKS: readonly ConformanceCheck[] = [
  {
    name: 'tokens-increase',
    about: "every grant carries a bigint token larger than the key's earlier holders' tokens, across instances, whether granted free or after waiting in the queue, whatever other keys were granted meanwhile",
    skipUnless: fencing,
    async run(c) {
      const key = c.key();
      let last = -1n;
      for (let round = 0; round < 6; round++) {
        const backend = c.at(round);
        const owner = c.owner();
        const grant = await c.acquire(backend, key, owner);
        expect(grant.acquired, `a free key was not granted (round ${round})`);
        expect(typeof grant.token === 'bigint', `grant ${round} carried ${grant.token === undefined ? 'no token' : `a ${typeof grant.token}`}, not a bigint token`);
        expect(grant.token > last, `grant ${round}'s token ${grant.token} is not larger than the earlier holder's ${last}`);
        last = grant.token;
        // Another key taken meanwhile must not hand this key a smaller token afterwards.
        const other = c.key('other');
        await c.acquire(c.at(round + 1), other, c.owner());
        expect(await backend.release(key, owner), 'release() by the holder answered false');
      }
      // A waiter granted after the holder lets go: its token too is larger than the holder's,
      // whatever was granted elsewhere while it waited.
      const holder = c.owner();
      const waiter = c.owner();
      const held = await c.acquire(c.at(0), key, holder);
      expect(held.acquired && held.token! > last, `a free key was not granted a token larger than ${last}`);
      expect(!(await c.acquire(c.at(1), key, waiter, { queue: true })).acquired, 'a held key was granted to a waiter');
      // Taken after the waiter's place in line was made: a multi-key lease's token is the largest
      // of its keys' tokens, so the next holder of one key must outgrow every key's token before.
      const meanwhile = await c.acquire(c.at(2), c.key('other'), c.owner());
      expect(meanwhile.acquired && typeof meanwhile.token === 'bigint', 'a free key was not granted with a token');
      expect(await c.at(0).release(key, holder), 'release() by the holder answered false');
      let granted: bigint | undefined;
      for (let attempt = 0; attempt < 50 && granted === undefined; attempt++) {
        const grant = await c.acquire(c.at(1), key, waiter, { queue: true });
        if (grant.acquired) granted = grant.token;
        else await c.at(1).waitForTurn(key, waiter, 200, c.signal);
      }
      expect(typeof granted === 'bigint', 'the queued waiter was not granted the released key, or carried no token');
      expect(granted > held.token!, `the waiter's token ${granted} is not larger than the holder's ${held.token} before it`);
      expect(granted > meanwhile.token!, `the waiter's token ${granted} is not larger than ${meanwhile.token}, granted on another key while it waited (a multi-key lease holding both would fence it out)`);
    },
  },
  {
    name: 'semaphore-admits-at-most-permits',
    about: 'a semaphore of N permits grants N holders on different instances, refuses the next, and admits it once one releases',
    skipUnless: semaphores,
    async run(c) {
      const key = c.key();
      const permits = 3;
      const views = c.instances.map((backend) => withPermits(backend, permits));
      const owners = [c.owner(), c.owner(), c.owner()];
      const tokens: bigint[] = [];
      for (let i = 0; i < permits; i++) {
        const grant = await c.acquire(views[i % views.length], key, owners[i]);
        expect(grant.acquired, `holder ${i + 1} of ${permits} permits was refused`);
        if (c.at(0).capabilities.fencing) {
          expect(typeof grant.token === 'bigint' && grant.token > (tokens.at(-1) ?? -1n), `holder ${i + 1}'s token ${grant.token} does not grow past ${tokens.at(-1)}`);
          tokens.push(grant.token!);
        }
      }
      const extra = c.owner();
      expect(!(await c.acquire(views[1], key, extra)).acquired, `a semaphore of ${permits} permits admitted a ${permits + 1}th holder`);
      expect(await views[0].release(key, owners[0]), 'release() by a semaphore holder answered false');
      expect((await c.acquire(views[1], key, extra)).acquired, 'a freed permit was not granted');
      // Each holder renews through the instance that granted it (as the engine does).
      expect((await views[1].extend(key, owners[1], c.ttlMs)) === true, 'extend() by a semaphore holder answered false');
      expect((await views[1].extend(key, c.owner(), c.ttlMs)) === false, 'extend() by a stranger answered true');
    },
  },
  {
    name: 'semaphore-permits-agree',
    about: 'a plain lock or a semaphore of other permits on a held semaphore key is refused with InvalidLockOptionsError (field permits)',
    skipUnless: semaphores,
    async run(c) {
      const key = c.key();
      const views = c.instances.map((backend) => withPermits(backend, 2));
      expect((await c.acquire(views[0], key, c.owner())).acquired, 'a free semaphore key was not granted');
      expect((await c.acquire(views[1], key, c.owner())).acquired, 'the second permit was not granted');
      const plain = await outcome(c.acquire(c.at(2), key, c.owner()));
      expect(plain.error !== undefined || !plain.value?.acquired, 'a plain lock was granted on a full semaphore key');
      expect(isPermitsError(plain.error), `a plain lock on a semaphore key ${plain.error ? `rejected with ${describeError(plain.error)}` : 'was answered busy'}, not InvalidLockOptionsError (permits)`);
      const other = await outcome(c.acquire(withPermits(c.at(1), 5), key, c.owner()));
      expect(isPermitsError(other.error), `a semaphore of 5 on a key held with 2 ${other.error ? `rejected with ${describeError(other.error)}` : 'was answered without an error'}, not InvalidLockOptionsError (permits)`);
    },
  },
  {
    name: 'acquire-all-all-or-nothing',
    about: 'acquireAll() takes every key or none: busy on one key leaves the others free; granted, every key is held with one token',
    skipUnless: (backend) => (backend.acquireAll ? undefined : 'no acquireAll()'),
    async run(c) {
      const keys = [c.key('a'), c.key('b'), c.key('c')].sort();
      const blocker = c.owner();
      expect((await c.acquire(c.at(0), keys[1], blocker)).acquired, 'a free key was not granted');
      const owners = keys.map(() => c.owner());
      keys.forEach((key, i) => c.track(c.at(1), key, owners[i]));
      const busy = await c.at(1).acquireAll!(keys, owners, c.ttlMs);
      expect(!busy.acquired, 'acquireAll() was granted while one of its keys was held by another owner');
      for (const key of [keys[0], keys[2]]) {
        const probe = c.owner();
        expect((await c.acquire(c.at(2), key, probe)).acquired, 'a refused acquireAll() left one of its free keys held');
        expect(await c.at(2).release(key, probe), 'release() by the holder answered false');
      }
      expect(await c.at(0).release(keys[1], blocker), 'release() by the holder answered false');
      const granted = await c.at(1).acquireAll!(keys, owners, c.ttlMs);
      expect(granted.acquired, 'acquireAll() on free keys was refused');
      if (c.at(1).capabilities.fencing) expect(typeof granted.token === 'bigint', 'acquireAll() on a fencing backend carried no bigint token');
      for (const key of keys) expect(!(await c.acquire(c.at(2), key, c.owner())).acquired, 'a key of a granted acquireAll() was granted to another owner');
      for (let i = 0; i < keys.length; i++) expect(await c.at(1).release(keys[i], owners[i]), "a key of acquireAll() could not be released by its own owner");
    },
  },
];
