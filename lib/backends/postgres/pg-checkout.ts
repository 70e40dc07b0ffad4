import type { PgPoolClientLike, PgPoolLike } from './postgres-client.interface.js';

/** A client checked out of the pool, heard from the moment the pool handed it over. */
export interface CheckedOut {
  readonly client: PgPoolClientLike;
  /** The error the client emitted before `unguard()`, if any: the connection is dead. */
  error(): Error | undefined;
  /** Take the guard off once the caller listens itself (before giving the client back). */
  unguard(): void;
}

/**
 * `pool.connect()` with an 'error' listener on the client from the turn the pool hands it over.
 *
 * The promise form leaves a gap: pg-pool takes its own listener off at checkout, and `await`
 * resumes only microtasks later. A connection whose start-up ends in the same socket read as a
 * FATAL (the server died right then: 57P01 "unexpected postmaster exit") emits that error in the
 * gap with nobody listening, which Node turns into an uncaught exception — on the application's
 * pool too, whose `pool.on('error')` covers idle clients only. The callback form runs in the turn
 * of the checkout, so the guard is on before any later message is parsed.
 */
export function checkout(pool: PgPoolLike): Promise<CheckedOut> {
  return new Promise((resolve, reject) => {
    pool.connect((failure, client) => {
      if (failure || !client) return reject(failure ?? new Error('the pool handed over no client'));
      let seen: Error | undefined;
      const guard = (error?: Error): void => void (seen ??= error ?? new Error('connection error'));
      client.on('error', guard);
      resolve({ client, error: () => seen, unguard: () => void client.removeListener('error', guard) });
    });
  });
}
