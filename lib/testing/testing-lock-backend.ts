import { randomUUID } from 'node:crypto';
import { MemoryBackend } from '../backends/memory/memory.backend.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { LockBusyError } from '../errors/lock-busy.error.js';
import type { AcquireRequest, AcquireResult, HeldLock, HoldKind } from '../backends/lock-backend.interface.js';

/**
 * NOT DISTRIBUTED. The in-memory backend with the controls a unit test needs to drive a locked
 * method down its busy, lost and unavailable paths: another "replica" holding a key, a lease that
 * expires now, a backend that stops answering, a slow acquisition. Provided (and injectable) by
 * `DistributedLockTestingModule`.
 */
export class TestingLockBackend extends MemoryBackend {
  private unavailable?: string;
  private acquireDelayMs = 0;

  /**
   * Hold `key` as another owner (another replica), for `ttl` ms or until the returned function is
   * called. A decorated method then sees `LockBusyError` (409 on HTTP) or skips, as configured.
   * @throws LockBusyError the key is already held
   */
  async occupy(key: string, ttl = 24 * 3600_000): Promise<() => Promise<void>> {
    const owner = `other-replica:${randomUUID()}`;
    const result = await super.acquire({ key, owner, ttlMs: ttl, queue: false });
    if (!result.acquired) throw new LockBusyError(key, 'efficiency', this.name, 0, result.holderRemainingMs);
    return async () => void (await super.release(key, owner));
  }

  /**
   * End the lease on `key` now, as if its ttl had run out: the key is free for others and the
   * holder's `lease.signal` aborts with `LeaseLostError('expired')`. false: nobody held it.
   */
  expire(key: string): boolean {
    return this.takeAway(key, 'expired by TestingLockBackend.expire()', 'expired') !== undefined;
  }

  /**
   * From now on every acquire, extend, release and ping fails with `LockBackendUnavailableError`,
   * as when Redis or etcd cannot be reached, until `restore()`.
   */
  makeUnavailable(detail = 'made unavailable by TestingLockBackend.makeUnavailable()'): void {
    this.unavailable = detail;
  }

  /** Answer again after `makeUnavailable()`, and stop delaying acquisitions. */
  restore(): void {
    this.unavailable = undefined;
    this.acquireDelayMs = 0;
  }

  /** Every acquisition attempt takes `ms` before it is answered (0: no delay). */
  delayAcquisition(ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) throw new RangeError(`delayAcquisition(ms): ms must be a finite number ≥ 0, got ${ms}`);
    this.acquireDelayMs = ms;
  }

  /** Whether anyone (a lease or `occupy()`) holds `key` now. */
  isHeld(key: string): boolean {
    const now = performance.now();
    return this.liveHolder(key, now) !== undefined || this.readWrite.liveReaders(key, now) !== undefined || (this.liveSemaphore(key, now)?.holders.size ?? 0) > 0;
  }

  /**
   * Forget every key and queue, answer again, no delay: a clean backend for the next test. Leases
   * still held are told first (their signal aborts with `LeaseLostError('not-owner')`), so a test
   * never sees two unaborted holders of one key.
   */
  reset(): void {
    this.restore();
    const now = performance.now();
    const readers = this.readWrite.heldKeys(now).flatMap((key) => [...this.readWrite.liveReaders(key, now)!.keys()]);
    const owners = [...this.holders.values()].map((holder) => holder.owner).concat(this.dropSemaphores(), readers);
    this.holders.clear();
    this.queues.clear();
    this.readWrite.clear();
    this.tellLost(owners, 'the key was taken away by TestingLockBackend.reset()', 'not-owner');
  }

  override async acquire(request: AcquireRequest): Promise<AcquireResult> {
    if (this.acquireDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.acquireDelayMs));
    this.failIfUnavailable('acquire', request.key);
    return super.acquire(request);
  }

  override async extend(key: string, owner: string, ttlMs: number, hold?: HoldKind): Promise<boolean> {
    this.failIfUnavailable('extend', key);
    return super.extend(key, owner, ttlMs, hold);
  }

  override async release(key: string, owner: string, hold?: HoldKind): Promise<boolean> {
    this.failIfUnavailable('release', key);
    return super.release(key, owner, hold);
  }

  override async ping(): Promise<void> {
    this.failIfUnavailable('ping');
  }

  override async inspect(key: string): Promise<HeldLock | null> {
    this.failIfUnavailable('inspect', key);
    return super.inspect(key);
  }

  override async forceRelease(key: string): Promise<string | undefined> {
    this.failIfUnavailable('forceRelease', key);
    return super.forceRelease(key);
  }

  /** A semaphore's operations: the same delay and outage as the plain ones. */
  protected override async gate(operation: string, key: string): Promise<void> {
    if (operation === 'acquire' && this.acquireDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.acquireDelayMs));
    this.failIfUnavailable(operation, key);
  }

  private failIfUnavailable(operation: string, key?: string): void {
    if (this.unavailable !== undefined) throw new LockBackendUnavailableError(this.name, operation, this.unavailable, { key });
  }
}
