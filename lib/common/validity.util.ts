/**
 * Lease validity arithmetic, on the monotonic clock only. `Date.now()` can jump (NTP, a VM
 * resumed, a person fixing the time); `performance.now()` cannot, so a lease's end is computed
 * from it — measured from *before* the request was sent, so network time counts against us.
 */
export const monotonicNow = (): number => performance.now();

/** The allowance for clock drift between this process and the server: ttl × factor + 2 ms (as Redlock). */
export function driftAllowanceMs(ttlMs: number, driftFactor: number): number {
  return Math.floor(ttlMs * driftFactor) + 2;
}

/** Monotonic time until which a lease granted by a request sent at `sentAt` may be trusted. */
export function validUntil(sentAt: number, ttlMs: number, driftFactor: number): number {
  return sentAt + ttlMs - driftAllowanceMs(ttlMs, driftFactor);
}
