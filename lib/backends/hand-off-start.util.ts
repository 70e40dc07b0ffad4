import type { AcquireResult } from './lock-backend.interface.js';
import type { HandOffWaiters } from './hand-off-waiters.js';

/**
 * A queued owner handed the key by a release that granted it the ttl it queued with (PostgreSQL,
 * MySQL: the hand-off message carries that ttl and the new token): start at once, no claim round
 * trip. The grant happened after the owner's latest request answered "still queued" (that request
 * would have claimed it otherwise), so its validity counts from that request's send time (see
 * HandOffWaiters.handOff). When waiting for the message cost more than a tenth of it, or the grant
 * is shorter than the validity asked for, the full ttl is claimed in the background (`claim`, an
 * owner-checked extend) and the lease is provisional until it answers. undefined: too little is
 * left, the message is stale or carried no token — the caller claims first.
 */
export function startOnHandOff(waiters: HandOffWaiters, owner: string, validityMs: number, claim: () => Promise<boolean>): AcquireResult | undefined {
  const handOff = waiters.handOff(owner, validityMs, 'answer');
  if (!handOff || handOff.token === undefined) return undefined;
  waiters.forget(owner);
  const { validFrom, validForMs, token } = handOff;
  if (validForMs >= validityMs && performance.now() - validFrom <= validForMs / 10) {
    return { acquired: true, token, provisional: { validFrom, validForMs } };
  }
  const sentAt = performance.now();
  const confirmed = claim().then((held) => (held ? sentAt : undefined));
  confirmed.catch(() => undefined); // a failed claim leaves the grant to run out
  return { acquired: true, token, provisional: { validFrom, validForMs, confirmed } };
}

/**
 * Run `attempt` again every `delayMs` until it succeeds, `until` (a performance.now() time) would
 * pass, or `closed()`: the background retry of a give-back whose answer never came. Unref'd timers.
 */
export function retryInBackground(closed: () => boolean, until: number, delayMs: number, attempt: () => Promise<unknown>): void {
  if (closed() || performance.now() + delayMs > until) return;
  setTimeout(() => {
    if (closed()) return;
    attempt().catch(() => retryInBackground(closed, until, delayMs, attempt));
  }, delayMs).unref();
}
