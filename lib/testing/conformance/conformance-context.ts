import { randomUUID } from 'node:crypto';
import { withTimeout } from '../../backends/backend-call.util.js';
import type { AcquireResult, LockBackend } from '../../backends/lock-backend.interface.js';

/** What one check works with: the instances (as separate processes over one store) and its own keys. */
export interface CheckContext {
  /** The instances the factory made, at least two; `at(i)` wraps around. */
  readonly instances: readonly LockBackend[];
  at(i: number): LockBackend;
  /** A key of this check's own, never used by another check: `name` keeps reports readable. */
  key(name?: string): string;
  /** Count `key` (made from `key()`) among the keys the last check finds free. */
  adopt(key: string): string;
  /** A fresh owner id (a new acquisition). */
  owner(): string;
  readonly ttlMs: number;
  /** Aborts when the check is over (passed or failed): a wait it started ends then, leaving no timer. */
  readonly signal: AbortSignal;
  /** How soon a woken waiter must know, on a backend that claims `fairQueue`. */
  readonly wakeWithinMs: number;
  /**
   * One attempt by `owner` on `backend`, remembered so the check's holds are given back
   * afterwards whatever happens. A provisional grant counts only once confirmed.
   */
  acquire(backend: LockBackend, key: string, owner: string, options?: { queue?: boolean; ttlMs?: number }): Promise<Grant>;
  /** Remember a hold taken another way (through `withPermits`, `acquireAll`), to be given back afterwards. */
  track(backend: LockBackend, key: string, owner: string): void;
}

export type Grant = { readonly acquired: true; readonly token?: bigint } | { readonly acquired: false; readonly holderRemainingMs?: number };

/** A check failed: `message` is the report's reason. */
export class CheckFailure extends Error {}

export function expect(condition: unknown, message: string): asserts condition {
  if (!condition) throw new CheckFailure(message);
}

/** Resolve to whether `result` is a grant the backend stands by (a provisional one once confirmed). */
export async function settled(result: AcquireResult): Promise<Grant> {
  if (!result.acquired) return { acquired: false, holderRemainingMs: result.holderRemainingMs };
  const confirmed = result.provisional?.confirmed;
  if (confirmed && (await confirmed) === undefined) return { acquired: false };
  return { acquired: true, token: result.token };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `promise`, or a CheckFailure saying `what` took longer than `ms` (an answer already received when the bound comes due still counts). */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  return withTimeout(promise, ms, () => new CheckFailure(`${what} did not settle within ${ms} ms`));
}

/** The outcome of `promise` as a value: `{ error }` when it rejected. */
export async function outcome<T>(promise: Promise<T>): Promise<{ value: T; error?: undefined } | { value?: undefined; error: unknown }> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error };
  }
}

export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** A context for one check; `giveBack()` releases whatever it took, ignoring failures. */
export function checkContext(
  instances: readonly LockBackend[],
  settings: { keyPrefix: string; ttlMs: number; wakeWithinMs: number },
  check: string,
  usedKeys: Set<string>,
): CheckContext & { giveBack(): Promise<void> } {
  const taken: Array<{ backend: LockBackend; key: string; owner: string }> = [];
  const over = new AbortController();
  let n = 0;
  const context = {
    instances,
    signal: over.signal,
    ttlMs: settings.ttlMs,
    wakeWithinMs: settings.wakeWithinMs,
    at: (i: number) => instances[i % instances.length],
    key(name = 'k') {
      const key = `${settings.keyPrefix}${check}:${name}:${n++}`;
      usedKeys.add(key);
      return key;
    },
    adopt(key: string) {
      usedKeys.add(key);
      return key;
    },
    owner: () => `conformance:${randomUUID()}`,
    track(backend: LockBackend, key: string, owner: string) {
      taken.push({ backend, key, owner });
    },
    async acquire(backend: LockBackend, key: string, owner: string, options: { queue?: boolean; ttlMs?: number } = {}) {
      taken.push({ backend, key, owner });
      return settled(await backend.acquire({ key, owner, ttlMs: options.ttlMs ?? settings.ttlMs, queue: options.queue ?? false }));
    },
    async giveBack() {
      over.abort(new Error(`conformance: check ${check} is over`));
      for (const { backend, key, owner } of taken.reverse()) await backend.release(key, owner).catch(() => undefined);
    },
  };
  return context;
}
