import { MemoryBackend } from './memory.backend.js';

describe('MemoryBackend (single process, not distributed)', () => {
  it('declares itself fencing but not distributed', () => {
    expect(new MemoryBackend().capabilities).toEqual({ fencing: true, fairQueue: true, distributed: false, semaphore: true, readWrite: true });
  });

  it('grants one owner at a time with strictly increasing tokens', async () => {
    const backend = new MemoryBackend();
    const first = await backend.acquire({ key: 'k', owner: 'a', ttlMs: 1_000, queue: false });
    expect(first).toEqual({ acquired: true, token: 1n });
    expect(await backend.acquire({ key: 'k', owner: 'b', ttlMs: 1_000, queue: false })).toMatchObject({ acquired: false });
    expect(await backend.release('k', 'b')).toBe(false); // not b's key: untouched
    expect(await backend.release('k', 'a')).toBe(true);
    const second = await backend.acquire({ key: 'k', owner: 'b', ttlMs: 1_000, queue: false });
    const other = await backend.acquire({ key: 'other', owner: 'c', ttlMs: 1_000, queue: false });
    expect(second).toEqual({ acquired: true, token: 2n });
    expect(other).toEqual({ acquired: true, token: 3n });
  });

  it('expires a holder after its ttl, and the late owner cannot extend or release the new key', async () => {
    const backend = new MemoryBackend();
    await backend.acquire({ key: 'k', owner: 'a', ttlMs: 20, queue: false });
    await new Promise((r) => setTimeout(r, 30));
    expect(await backend.acquire({ key: 'k', owner: 'b', ttlMs: 1_000, queue: false })).toMatchObject({ acquired: true });
    expect(await backend.extend('k', 'a', 1_000)).toBe(false);
    expect(await backend.release('k', 'a')).toBe(false);
    expect(await backend.acquire({ key: 'k', owner: 'c', ttlMs: 1_000, queue: false })).toMatchObject({ acquired: false });
  });

  it('hands over in arrival order and wakes the next waiter on release', async () => {
    const backend = new MemoryBackend();
    await backend.acquire({ key: 'k', owner: 'holder', ttlMs: 10_000, queue: false });
    for (const owner of ['w1', 'w2']) {
      expect(await backend.acquire({ key: 'k', owner, ttlMs: 1_000, queue: true })).toMatchObject({ acquired: false });
    }
    // A newcomer that does not queue cannot jump the line once the key is free.
    const woken = backend.waitForTurn('k', 'w1', 5_000);
    await backend.release('k', 'holder');
    await woken;
    expect(await backend.acquire({ key: 'k', owner: 'newcomer', ttlMs: 1_000, queue: false })).toMatchObject({ acquired: false });
    expect(await backend.acquire({ key: 'k', owner: 'w2', ttlMs: 1_000, queue: true })).toMatchObject({ acquired: false });
    expect(await backend.acquire({ key: 'k', owner: 'w1', ttlMs: 1_000, queue: true })).toMatchObject({ acquired: true });
  });

  it('a waiter that leaves the queue passes the turn on', async () => {
    const backend = new MemoryBackend();
    await backend.acquire({ key: 'k', owner: 'holder', ttlMs: 10_000, queue: false });
    await backend.acquire({ key: 'k', owner: 'w1', ttlMs: 1_000, queue: true });
    await backend.acquire({ key: 'k', owner: 'w2', ttlMs: 1_000, queue: true });
    await backend.release('k', 'holder');
    await backend.release('k', 'w1'); // gives up
    expect(await backend.acquire({ key: 'k', owner: 'w2', ttlMs: 1_000, queue: true })).toMatchObject({ acquired: true });
  });

  it('rejects a wait with the abort reason', async () => {
    const backend = new MemoryBackend();
    await backend.acquire({ key: 'k', owner: 'holder', ttlMs: 10_000, queue: false });
    await backend.acquire({ key: 'k', owner: 'w', ttlMs: 1_000, queue: true });
    const controller = new AbortController();
    const waiting = backend.waitForTurn('k', 'w', 5_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
  });
});
