import type { LockBackend } from '../../backends/lock-backend.interface.js';
import type { ConformanceCheck } from './conformance-check.js';
import { CheckFailure, describeError, expect, outcome, sleep, within, type CheckContext } from './conformance-context.js';

/** How long a poll-based waiter (no `fairQueue`) may take to get a key its holder released. */
const POLLED_WITHIN_MS = 5_000;

/**
 * Wait as the engine does: `waitForTurn`, then one more attempt, until granted or `ms` passed.
 * Resolves with the grant's token and how long it took; rejects with a CheckFailure when not granted in time.
 */
export async function waitUntilGranted(c: CheckContext, backend: LockBackend, key: string, owner: string, ms: number, turnMs: number): Promise<{ token?: bigint; tookMs: number }> {
  const started = performance.now();
  for (;;) {
    const left = ms - (performance.now() - started);
    if (left <= 0) throw new CheckFailure(`a queued waiter was not granted the released key within ${ms} ms`);
    // The wait is given `turnMs` (long on a fair backend): only a wake-up ends it within the bound.
    const turn = backend.waitForTurn(key, owner, turnMs, c.signal);
    turn.catch(() => undefined); // ended by c.signal when the check fails on the bound below
    await within(left, 'waitForTurn() of a queued waiter after the release', turn);
    const grant = await c.acquire(backend, key, owner, { queue: true });
    if (grant.acquired) return { token: grant.token, tookMs: performance.now() - started };
  }
}

/** `key` held on instance 0 and a waiter queued for it on instance 1 (its attempt answered busy). */
async function heldWithWaiter(c: CheckContext, key: string): Promise<{ holder: string; waiter: string }> {
  const holder = c.owner();
  const waiter = c.owner();
  expect((await c.acquire(c.at(0), key, holder)).acquired, 'a free key was not granted');
  expect(!(await c.acquire(c.at(1), key, waiter, { queue: true })).acquired, 'a held key was granted to a waiter');
  return { holder, waiter };
}

const fair = (backend: LockBackend): string | undefined => (backend.capabilities.fairQueue ? undefined : 'capabilities.fairQueue is false');

export const QUEUE_CHECKS: readonly ConformanceCheck[] = [
  {
    name: 'waiter-granted-after-release',
    about: 'a queued waiter on another instance gets the key once its holder releases it (without polling, within wakeWithinMs, where fairQueue says so)',
    async run(c) {
      const key = c.key();
      const { holder, waiter } = await heldWithWaiter(c, key);
      const fairQueue = c.at(1).capabilities.fairQueue;
      // A fair backend is told to wait far longer than the bound: only a wake-up can meet it.
      const turnMs = fairQueue ? c.ttlMs * 10 : 500;
      const waiting = waitUntilGranted(c, c.at(1), key, waiter, fairQueue ? c.wakeWithinMs : POLLED_WITHIN_MS, turnMs);
      await sleep(50);
      expect(await c.at(0).release(key, holder), 'release() by the holder answered false');
      const { tookMs } = await waiting;
      expect(!(await c.acquire(c.at(2), key, c.owner())).acquired, `the waiter was granted the key after ${Math.round(tookMs)} ms, and so was another owner`);
    },
  },
  {
    name: 'waiters-served-in-order',
    about: 'waiters on different instances are granted the key in the order they queued',
    skipUnless: fair,
    async run(c) {
      const key = c.key();
      const holder = c.owner();
      const waiters = [c.owner(), c.owner(), c.owner()];
      expect((await c.acquire(c.at(0), key, holder)).acquired, 'a free key was not granted');
      // Each waiter is queued (its attempt answered) before the next one asks.
      for (let i = 0; i < waiters.length; i++) expect(!(await c.acquire(c.at(i + 1), key, waiters[i], { queue: true })).acquired, 'a held key was granted to a waiter');
      let previous = holder;
      let previousBackend = c.at(0);
      for (let i = 0; i < waiters.length; i++) {
        expect(await previousBackend.release(key, previous), `release() by holder ${i} answered false`);
        await waitUntilGranted(c, c.at(i + 1), key, waiters[i], c.wakeWithinMs, c.ttlMs * 10);
        for (let j = i + 1; j < waiters.length; j++) {
          const later = await c.acquire(c.at(j + 1), key, waiters[j], { queue: true });
          expect(!later.acquired, `waiter ${j} (queued later) was granted the key while waiter ${i} (queued earlier) was served`);
        }
        previous = waiters[i];
        previousBackend = c.at(i + 1);
      }
    },
  },
  {
    name: 'departed-waiter-does-not-block',
    about: 'a waiter that leaves the queue (release() without holding) does not stand between the key and the next caller',
    async run(c) {
      const key = c.key();
      const { holder, waiter: leaver } = await heldWithWaiter(c, key);
      expect((await c.at(1).release(key, leaver)) === false, 'release() by a waiter that never held the key answered true');
      expect(await c.at(0).release(key, holder), 'release() by the holder answered false');
      const started = performance.now();
      for (;;) {
        if ((await c.acquire(c.at(2), key, c.owner())).acquired) break;
        const waited = performance.now() - started;
        if (waited > c.wakeWithinMs) throw new CheckFailure(`the free key was still refused ${Math.round(waited)} ms after a waiter left the queue and the holder released`);
        await sleep(25);
      }
    },
  },
  {
    name: 'wait-stops-on-signal',
    about: "waitForTurn() rejects with the signal's reason soon after the signal aborts",
    async run(c) {
      const key = c.key();
      const { holder, waiter } = await heldWithWaiter(c, key);
      const reason = new Error('conformance: stop waiting');
      // A wait may end early on a wake-up that is not a turn (a backend re-checks once its watch is
      // set up, say): the contract allows that, so wait again, a few times at most. The abort comes
      // on the next turn of the event loop, before any timer: a backend that polls (no fairQueue)
      // is not held to a poll interval here.
      let controller = new AbortController();
      for (let tries = 0; ; tries++) {
        controller = new AbortController();
        const waiting = outcome(c.at(1).waitForTurn(key, waiter, c.ttlMs * 10, controller.signal));
        const early = await Promise.race([waiting, new Promise<undefined>((resolve) => setImmediate(() => resolve(undefined)))]);
        if (early !== undefined) {
          expect(early.error === undefined, `waitForTurn() rejected with ${describeError(early.error)} before its signal aborted`);
          expect(tries < 5, 'waitForTurn() on a held key resolved at once 5 times in a row');
          continue;
        }
        controller.abort(reason);
        const result = await within(1_000, 'waitForTurn() after its signal aborted', waiting);
        expect(result.error === reason, `waitForTurn() ${result.error ? `rejected with ${describeError(result.error)}` : 'resolved'} after its signal aborted, instead of rejecting with the signal's reason`);
        break;
      }
      const already = await outcome(c.at(1).waitForTurn(key, waiter, 1_000, controller.signal));
      expect(already.error === reason, 'waitForTurn() with an aborted signal did not reject with its reason');
    },
  },
];
