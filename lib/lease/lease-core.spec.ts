import { MemoryBackend } from '../backends/memory/memory.backend.js';
import { LeaseLostError } from '../errors/lease-lost.error.js';
import type { LeasePolicy } from '../options/lock-options.util.js';
import { LeaseCore, type LeaseObserver } from './lease-core.js';

const policy: LeasePolicy = { lockAtLeastFor: 0, lockDelay: 0, rejectOnLoss: false };
const observer: LeaseObserver = { lost: () => undefined, ended: () => undefined, released: () => undefined, renewed: () => undefined, renewalFailed: () => undefined };

/** A lease granted provisionally (a hand-off message): valid 200 ms until its claim answers. */
function provisional(): LeaseCore {
  return new LeaseCore({
    key: 'k',
    purpose: 'efficiency',
    token: undefined,
    backend: new MemoryBackend(),
    backendName: 'memory',
    owner: 'owner',
    ttlMs: 10_000,
    validUntilMs: performance.now() + 200,
    driftFactor: 0.01,
    policy,
    observer,
  });
}

describe('LeaseCore.confirmWith (provisional hand-off grants)', () => {
  it("a confirmed claim extends validity to the full ttl from the claim's send time", async () => {
    const core = provisional();
    expect(core.remainingMs()).toBeLessThanOrEqual(200);
    const sentAt = performance.now();
    core.confirmWith(Promise.resolve(sentAt));
    await new Promise((r) => setImmediate(r));
    expect(core.remainingMs()).toBeGreaterThan(9_000);
    await core.release();
  });

  it('a claim that finds the key not ours loses the lease at once (not-owner)', async () => {
    const core = provisional();
    core.confirmWith(Promise.resolve(undefined));
    await new Promise((r) => setImmediate(r));
    expect(core.controller.signal.aborted).toBe(true);
    expect(core.controller.signal.reason).toBeInstanceOf(LeaseLostError);
    expect((core.controller.signal.reason as LeaseLostError).reason).toBe('not-owner');
  });

  it('a claim that could not be sent leaves the provisional validity to run out (signal aborts at its end)', async () => {
    const core = provisional();
    core.confirmWith(Promise.reject(new Error('unreachable')));
    await new Promise((r) => setImmediate(r)); // the rejection has been handled
    expect(core.controller.signal.aborted).toBe(false);
    expect(core.remainingMs()).toBeLessThanOrEqual(200); // not extended
    // It aborts when the provisional validity ends (waited for by event, not by a fixed sleep).
    await new Promise((r) => core.controller.signal.addEventListener('abort', r, { once: true }));
    expect((core.controller.signal.reason as LeaseLostError).reason).toBe('expired');
  });

  it('a confirmation after release changes nothing', async () => {
    const core = provisional();
    let resolve!: (v: number) => void;
    core.confirmWith(new Promise<number>((r) => (resolve = r)));
    await core.release();
    resolve(performance.now());
    await new Promise((r) => setImmediate(r));
    expect(core.remainingMs()).toBe(0);
    expect(core.state).toBe('released');
  });
});
