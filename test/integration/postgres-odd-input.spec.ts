import { InvalidLockOptionsError } from '../../lib/index.js';
import { freshPostgres, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 6 on PostgreSQL. The README: keys are "non-empty,
// well-formed strings of at most 1024 characters", and bad input is an InvalidLockOptionsError
// naming the field, before any backend call.
//  (a) A valid key of 1024 characters (here 3-byte UTF-8 characters that do not compress: 3,072
//      bytes) cannot be stored: the lease table's primary key is a btree, whose entries are at
//      most 2,704 bytes. Every call (acquire, tryAcquire, semaphore, campaign) fails with
//      LockBackendUnavailableError ("index row size 3088 exceeds btree version 4 maximum 2704") —
//      an "unavailable, retry later" error for a key that can never work. It fails closed (nothing
//      is left held), but neither as the README promises (the key is valid) nor as bad input.
//      900 such characters (2,700 bytes) already fail; 800 work.
//  (b) list() with a NUL in `prefix` is refused naming `key`, not `prefix`.

function bmp(n: number, seed: number): string {
  let x = seed;
  let s = '';
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += String.fromCharCode(0x800 + (x % (0xd7ff - 0x800)));
  }
  return s;
}

const outcome = async (f: () => Promise<unknown>): Promise<string> => {
  try {
    const r = (await f()) as { release?: () => Promise<unknown> } | null;
    await r?.release?.();
    return r && typeof r.release === 'function' ? 'lease' : 'ok';
  } catch (error) {
    return error instanceof InvalidLockOptionsError ? `InvalidLockOptionsError(${error.field})` : `${(error as Error).name}: ${(error as Error).message.slice(-90)}`;
  }
};

describe('odd input on PostgreSQL', () => {
  let running: BackendServer;
  let app: LockApp;
  beforeAll(async () => {
    running = await freshPostgres();
    app = await startLockApp(running.options);
  }, 90_000);
  afterAll(async () => {
    await app?.close();
    await running?.stop();
  });

  it('(a) a valid 1024-character key works (or, if the backend cannot store it, is refused as InvalidLockOptionsError naming key)', async () => {
    const key = bmp(1024, 1);
    expect(key.length).toBe(1024);
    const o = { purpose: 'correctness' as const, backend: 'postgres', ttl: 5_000 };
    const seen = {
      acquire: await outcome(() => app.locks.acquire(key, o)),
      tryAcquire: await outcome(() => app.locks.tryAcquire(key, o)),
      semaphore: await outcome(() => app.locks.acquire(key, { ...o, permits: 2 })),
      campaign: await outcome(() => app.locks.campaign(key, o)),
    };
    const fine = (s: string): boolean => s === 'lease' || s === 'ok' || s === 'InvalidLockOptionsError(key)';
    expect(Object.entries(seen).filter(([, s]) => !fine(s))).toEqual([]);
  });

  it('(b) list() with a NUL in prefix is refused naming prefix', async () => {
    expect(await outcome(() => app.locks.list({ backend: 'postgres' }, { prefix: 'a\u0000' }))).toBe('InvalidLockOptionsError(prefix)');
  });
});
