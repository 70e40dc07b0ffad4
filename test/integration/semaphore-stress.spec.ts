import type { Lease } from '../../lib/index.js';
import { sleep, startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';
import { EVERY_BACKEND, type BackendServer } from '../harness/backend-servers.js';

// Adversarial review of semaphores (`permits`): many callers from three applications race for the
// permits of one key while holders release, let their ttl run out (a paused holder), extend, give
// up mid-acquisition (their signal) or only try. From the engine's own view — a lease counts from
// its grant until its signal aborts, its remainingMs is 0 or its release is called — never more
// than `permits` at once; on fencing backends a grant's token is larger than that of every lease
// granted before this grant's acquisition was sent; and nothing is left held or queued afterwards.

// Every backend that queues and serves semaphores.
const ALL = EVERY_BACKEND.filter((c) => c.semaphores);
const only = process.env.RV_SEM_BACKENDS?.split(',');
const CASES = only ? ALL.filter((c) => only.includes(c.name) || only.includes(c.backend)) : ALL;

const PERMITS = 3;
const WORKERS = Number(process.env.RV_WORKERS ?? 9);
const ROUNDS = Number(process.env.RV_ROUNDS ?? 5);

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Held {
  id: number;
  lease: Lease;
  sentAt: number;
  grantedAt: number;
  releasing: boolean;
}

describe.each(CASES)('semaphore stress on $name', (c) => {
  let running: BackendServer;
  let apps: LockApp[] = [];
  beforeAll(async () => {
    running = await c.server();
    apps = await Promise.all([startLockApp(running.options), startLockApp(running.options), startLockApp(running.options)]);
  }, 90_000);
  afterAll(async () => {
    for (const app of apps) await app.close();
    await running?.stop();
  });

  it('never more than `permits` valid leases at once, tokens grow, nothing left behind', async () => {
    const key = uniqueKey(`rv-sem-stress-${c.backend}`);
    const opts = (more: object) => ({ purpose: c.purpose, backend: c.backend, permits: PERMITS, ...more });
    const random = rng(7);
    const held = new Set<Held>();
    const all: Held[] = [];
    const violations: string[] = [];
    const errors: string[] = [];
    let ids = 0;
    let most = 0;
    const valid = (h: Held): boolean => !h.releasing && !h.lease.signal.aborted && h.lease.remainingMs() > 0;
    const granted = (lease: Lease, sentAt: number): Held => {
      const h: Held = { id: ++ids, lease, sentAt, grantedAt: performance.now(), releasing: false };
      const others = [...held].filter(valid);
      if (others.length >= PERMITS) {
        violations.push(`grant #${h.id} with ${others.length} valid: ${others.map((o) => `#${o.id} rem=${o.lease.remainingMs()}`).join(', ')}`);
      }
      held.add(h);
      all.push(h);
      most = Math.max(most, others.length + 1);
      return h;
    };
    const release = async (h: Held): Promise<void> => {
      h.releasing = true;
      held.delete(h);
      await h.lease.release().catch(() => undefined);
    };
    const worker = async (w: number): Promise<void> => {
      const app = apps[w % apps.length];
      for (let i = 0; i < ROUNDS; i++) {
        const kind = Math.floor(random() * 5);
        const hold = 5 + Math.floor(random() * 60);
        const sentAt = performance.now();
        try {
          if (kind === 0) {
            // A holder that pauses past its ttl: it never releases; its permit frees at its ttl.
            const lease = await app.locks.acquire(key, opts({ ttl: 600, wait: 30_000 }));
            const h = granted(lease, sentAt);
            await new Promise<void>((resolve) => lease.signal.addEventListener('abort', () => resolve(), { once: true }));
            h.releasing = true;
            held.delete(h);
            await sleep(50);
            await lease.release().catch(() => undefined);
          } else if (kind === 1) {
            // A caller that gives up while its acquisition is in flight or queued.
            const controller = new AbortController();
            setTimeout(() => controller.abort(new Error('gave up')), Math.floor(random() * 40));
            const lease = await app.locks.acquire(key, opts({ ttl: 5_000, wait: 30_000, signal: controller.signal })).catch(() => undefined);
            if (lease) {
              const h = granted(lease, sentAt);
              await sleep(hold);
              await release(h);
            }
          } else if (kind === 2) {
            const lease = await app.locks.tryAcquire(key, opts({ ttl: 5_000 }));
            if (lease) {
              const h = granted(lease, sentAt);
              await sleep(hold);
              await release(h);
            }
          } else if (kind === 3) {
            const lease = await app.locks.acquire(key, opts({ ttl: 800, wait: 30_000 }));
            const h = granted(lease, sentAt);
            await sleep(hold);
            await lease.extend(800).catch(() => undefined);
            await sleep(hold);
            await release(h);
          } else {
            const lease = await app.locks.acquire(key, opts({ ttl: 5_000, wait: 30_000 }));
            const h = granted(lease, sentAt);
            await sleep(hold);
            await release(h);
          }
        } catch (error) {
          errors.push(`w${w} r${i} kind ${kind}: ${String(error)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    const tokenProblems: string[] = [];
    if (c.fencing) {
      const tokens = all.map((h) => h.lease.token);
      if (tokens.some((t) => t === undefined)) tokenProblems.push('a lease without a token');
      if (new Set(tokens.map(String)).size !== tokens.length) tokenProblems.push('two leases with one token');
      for (const g of all) {
        for (const l of all) {
          if (l !== g && l.grantedAt < g.sentAt && !(l.lease.token! < g.lease.token!)) {
            tokenProblems.push(`#${g.id} (token ${g.lease.token}) granted after #${l.id} (token ${l.lease.token}) was, with a token not larger`);
          }
        }
      }
    }
    let left = await apps[0].locks.inspect(key, { backend: c.backend });
    for (let j = 0; j < 100 && left !== null; j++) {
      await sleep(50);
      left = await apps[0].locks.inspect(key, { backend: c.backend });
    }
    expect({ violations, errors, tokenProblems: tokenProblems.slice(0, 10), left }).toEqual({ violations: [], errors: [], tokenProblems: [], left: null });
    expect(most).toBeLessThanOrEqual(PERMITS);
    expect(all.length).toBeGreaterThan(WORKERS * ROUNDS * 0.4);
  }, 240_000);
});
