import type { ConformanceCheck } from './conformance-check.js';
import { expect } from './conformance-context.js';

/** What every backend promises, whatever its capabilities: one holder, and only it acts on its key. */
export const CORE_CHECKS: readonly ConformanceCheck[] = [
  {
    name: 'exclusion',
    about: 'while one instance holds a key, no other owner on any instance is granted it',
    async run(c) {
      const key = c.key();
      const holder = c.owner();
      expect((await c.acquire(c.at(0), key, holder)).acquired, 'a free key was not granted');
      for (let i = 0; i < c.instances.length; i++) {
        const other = await c.acquire(c.at(i), key, c.owner());
        expect(!other.acquired, `instance ${i} granted a key that instance 0 holds: two holders`);
      }
      const again = await c.acquire(c.at(0), key, c.owner(), { queue: true });
      expect(!again.acquired, 'a queued attempt was granted a held key');
    },
  },
  {
    name: 'owner-checked-release',
    about: "release() by an owner that does not hold the key answers false and leaves the holder's key",
    async run(c) {
      const key = c.key();
      const holder = c.owner();
      expect((await c.acquire(c.at(0), key, holder)).acquired, 'a free key was not granted');
      expect((await c.at(1).release(key, c.owner())) === false, 'release() by a stranger answered true');
      expect(!(await c.acquire(c.at(1), key, c.owner())).acquired, "a stranger's release() freed the holder's key");
      expect((await c.at(0).release(key, holder)) === true, 'release() by the holder answered false');
      expect((await c.acquire(c.at(1), key, c.owner())).acquired, 'the key was not free after its holder released it');
    },
  },
  {
    name: 'owner-checked-extend',
    about: 'extend() lengthens the holder\'s key and answers false for any other owner',
    async run(c) {
      const key = c.key();
      const holder = c.owner();
      expect((await c.acquire(c.at(0), key, holder)).acquired, 'a free key was not granted');
      expect((await c.at(1).extend(key, c.owner(), c.ttlMs)) === false, 'extend() by a stranger answered true');
      expect((await c.at(0).extend(key, holder, c.ttlMs)) === true, 'extend() by the holder answered false');
      expect(!(await c.acquire(c.at(1), key, c.owner())).acquired, 'the key was free after its holder extended it');
    },
  },
  {
    name: 'stale-owner-cannot-touch-next-holder',
    about: "an earlier holder's release() and extend() after it let go never touch the next holder's key",
    async run(c) {
      const key = c.key();
      const first = c.owner();
      expect((await c.acquire(c.at(0), key, first)).acquired, 'a free key was not granted');
      expect(await c.at(0).release(key, first), 'release() by the holder answered false');
      const second = c.owner();
      expect((await c.acquire(c.at(1), key, second)).acquired, 'the key was not free after its holder released it');
      expect((await c.at(0).release(key, first)) === false, "the earlier holder's second release() answered true");
      expect((await c.at(0).extend(key, first, c.ttlMs)) === false, "the earlier holder's extend() answered true");
      expect(!(await c.acquire(c.at(2), key, c.owner())).acquired, "the earlier holder's release() deleted the next holder's key");
      expect(await c.at(1).release(key, second), 'the next holder could not release its key');
    },
  },
  {
    name: 'single-try-leaves-no-trace',
    about: 'a busy attempt with queue: false leaves no queue entry: once the key is free anyone gets it at once',
    async run(c) {
      const key = c.key();
      const holder = c.owner();
      expect((await c.acquire(c.at(0), key, holder)).acquired, 'a free key was not granted');
      for (let i = 1; i <= 3; i++) expect(!(await c.acquire(c.at(i), key, c.owner())).acquired, 'a held key was granted');
      expect(await c.at(0).release(key, holder), 'release() by the holder answered false');
      expect((await c.acquire(c.at(1), key, c.owner())).acquired, 'after single tries, the free key was refused (a try left itself queued)');
    },
  },
  {
    name: 'distinct-keys',
    about: 'keys that differ (case, a suffix, braces, non-ASCII, 500 characters) are held independently',
    async run(c) {
      const base = c.key('shape');
      const names = [base, `${base}:1`, base.toUpperCase(), `{${base}}`, `}${base}{`, `${base}/ключ-ü-😀`, `${base} x`, `${base}${'x'.repeat(500 - base.length)}`].map((name) => c.adopt(name));
      const owners = names.map(() => c.owner());
      for (let i = 0; i < names.length; i++) {
        const grant = await c.acquire(c.at(i), names[i], owners[i]);
        expect(grant.acquired, `key ${JSON.stringify(names[i].slice(0, 60))} was refused while only other keys were held`);
      }
      for (let i = 0; i < names.length; i++) {
        expect(!(await c.acquire(c.at(i + 1), names[i], c.owner())).acquired, `key ${JSON.stringify(names[i].slice(0, 60))} was granted twice`);
      }
      for (let i = 0; i < names.length; i++) {
        expect(await c.at(i).release(names[i], owners[i]), `key ${JSON.stringify(names[i].slice(0, 60))} could not be released by its holder`);
      }
    },
  },
];
