import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { HoldKind, LockBackend } from './lock-backend.interface.js';

/** Most permits a semaphore may have: a larger number is a bug (a count of rows, a byte size). */
export const MAX_PERMITS = 10_000;

/**
 * The error of an acquisition that finds `key` held or queued with another number of permits
 * (a plain lock counts as 1): two groups with different limits would each admit their own.
 */
export function permitsMismatch(key: string, found: number, asked: number): InvalidLockOptionsError {
  return new InvalidLockOptionsError(
    'permits',
    `"${key}" is held or awaited with permits ${found}${found === 1 ? ' (a plain lock)' : ''}, this call asks for ${asked}: ` +
      'every caller of one key must agree on permits',
  );
}

/**
 * `backend` as seen by the holders of a semaphore of `permits` (≥ 2): every acquisition asks for
 * `permits`, and every call on a hold says so (`HoldKind`). The engine passes this to the code that
 * takes, renews and gives back leases, which then needs no notion of semaphores; the backend
 * itself dispatches on the request. Key-wide calls (inspect, listKeys, forceRelease, ping) are the
 * backend's own.
 */
export function withPermits(backend: LockBackend, permits: number): LockBackend {
  const hold: HoldKind = { permits };
  return {
    name: backend.name,
    capabilities: backend.capabilities,
    acquire: (request) => backend.acquire({ ...request, permits }),
    waitForTurn: (key, owner, timeoutMs, signal) => backend.waitForTurn(key, owner, timeoutMs, signal, hold),
    extend: (key, owner, ttlMs) => backend.extend(key, owner, ttlMs, hold),
    release: (key, owner) => backend.release(key, owner, hold),
    checkKey: backend.checkKey?.bind(backend),
    inspect: backend.inspect?.bind(backend),
    listKeys: backend.listKeys?.bind(backend),
    forceRelease: backend.forceRelease?.bind(backend),
    ping: backend.ping?.bind(backend),
    validUntil: backend.validUntil?.bind(backend),
    // Losses reach the engine through the backend's own onLeaseLost; the backend is closed by its owner.
    close: async () => undefined,
  };
}

/** The permits of a request or hold: 1 for a plain lock. */
export const permitsOf = (kind: { readonly permits?: number } | undefined): number => kind?.permits ?? 1;
