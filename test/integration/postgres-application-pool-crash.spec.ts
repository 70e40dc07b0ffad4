import { PostgresBackend } from '../../lib/index.js';
import { closablePool } from '../harness/pg-pool.js';
import { PostgresServer } from '../harness/postgres.mjs';
import { sleep, startLockApp, uniqueKey } from '../harness/lock-app.js';

// A backend on the application's own pool (`{ pool }`, never closed by the module) while the
// server crashes. The application handles its pool's errors as pg tells it to (`pool.on('error')`,
// which covers idle clients) and nothing more: a client the backend has checked out must never
// emit an error nobody hears (Node turns one into an uncaught exception, which ends a real
// application). Found in CI (2026-12-05): 57P01 "unexpected postmaster exit" uncaught in
// postgres-backend.spec, from the LISTEN session's checkout (see pg-checkout.ts).

describe("PostgreSQL backend on the application's pool: the server crashing as the backend reconnects", () => {
  let server: PostgresServer;

  beforeAll(async () => {
    server = await PostgresServer.start();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it('the LISTEN session reconnecting while the server dies again (a restart, then kill -9 at staggered moments): no error goes unheard', async () => {
    // The backend's LISTEN session reconnects after each outage (100 ms doubling). A kill -9 that
    // lands as its new connection finishes start-up sends the FATAL in the same socket read as the
    // start-up's end: pg-pool has taken its own listener off, and a `pool.connect()` awaited leaves
    // the client unheard until the await resumes. Watched failing before pg-checkout.ts: 3 runs
    // of 4 (45 rounds each), "Unhandled error. (error: terminating connection due to unexpected
    // postmaster exit".
    const { pool, end } = closablePool(server);
    pool.on('error', () => undefined);
    const postgres = new PostgresBackend({ pool, ownsPool: false, waiterHeartbeatMs: 10_000 });
    const app = await startLockApp({ backends: { postgres } });
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown): void => void uncaught.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      for (let round = 0; round < 45; round++) {
        const lease = await app.locks.acquire(uniqueKey('pg-app-pool-listen'), { purpose: 'correctness', ttl: 2_000, wait: 5_000 });
        await lease.release();
        await server.restart();
        await sleep((round * 7) % 300);
        await server.kill();
        await server.launch();
      }
      const lease = await app.locks.acquire(uniqueKey('pg-app-pool-listen'), { purpose: 'correctness', ttl: 2_000, wait: 5_000 });
      await lease.release();
      await sleep(200);
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await app.close();
      await postgres.close();
      await end();
    }
  }, 120_000);
});
