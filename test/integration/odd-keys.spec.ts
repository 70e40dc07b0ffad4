import { InvalidLockOptionsError } from '../../lib/index.js';
import { backendCases, type BackendServer } from '../harness/backend-servers.js';
import { startLockApp, uniqueKey, type LockApp } from '../harness/lock-app.js';

// Adversarial review round 3 (adv2), attack 6: odd but valid keys (the README: non-empty,
// well-formed strings of at most 1024 characters). Each is either refused up front with
// InvalidLockOptionsError naming `key`, or works like any key: exclusive, distinct from its
// look-alikes, handed to a waiter on release, inspectable, listable, force-releasable.

/** Deterministic "random" so a failure repeats: 3-byte UTF-8 characters (U+0800..U+D7FF) that do not compress. */
function bmp(n: number, seed: number): string {
  let x = seed;
  let s = '';
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += String.fromCharCode(0x800 + (x % (0xd7ff - 0x800)));
  }
  return s;
}
function astral(n: number, seed: number): string {
  let x = seed;
  let s = '';
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    s += String.fromCodePoint(0x10000 + (x % 0xfffff));
  }
  return s;
}

// Every backend that queues (each key is also handed on to a waiter), every topology.
const CASES = backendCases((c) => c.queues);

const describeError = (e: unknown): string => `${(e as Error)?.name}${(e as { field?: string }).field ? `(field ${(e as { field?: string }).field})` : ''}: ${String((e as Error)?.message).slice(0, 160)}`;

describe.each(CASES)('odd keys on $name', ({ backend, purpose, server }) => {
  let running: BackendServer;
  let a: LockApp;
  let b: LockApp;
  beforeAll(async () => {
    running = await server();
    [a, b] = await Promise.all([startLockApp(running.options), startLockApp(running.options)]);
  }, 90_000);
  afterAll(async () => {
    for (const app of [a, b]) await app?.close().catch(() => undefined);
    await running?.stop();
  }, 60_000);

  it('every valid odd key either is refused naming key, or is exclusive, distinct, handed on, inspected, listed and force-released', async () => {
    const opts = (more: object = {}) => ({ purpose, backend, ...more });
    const u = uniqueKey('adv2odd');
    // [key, a distinct look-alike that must not collide with it]
    const pairs: Array<[string, string]> = [
      [bmp(1024, 1), bmp(1023, 1)],
      [astral(512, 2), astral(511, 2) + 'x'],
      [`}${u}`, `%7D${u}`],
      [`{}${u}`, `${u}`],
      [`{${u}}x`, `{${u}}y`],
      [`${u}/.`, `${u}/%2E`],
      [`${u}/..`, `${u}/.%2E`],
      [`${u}*?[a]`, `${u}*?[b]`],
      [`${u}%_\\`, `${u}%_/`],
      [`${u}\u0000`, `${u}`],
      [`${u} `, `${u}\t`],
    ];
    const findings: string[] = [];
    for (const [key, twin] of pairs) {
      const name = JSON.stringify(key.length > 40 ? `${key.slice(0, 12)}…(${key.length} chars)` : key);
      let lease;
      try {
        lease = await a.locks.acquire(key, opts({ ttl: 20_000 }));
      } catch (error) {
        if (!(error instanceof InvalidLockOptionsError && (error as { field?: string }).field === 'key')) findings.push(`${name}: acquire failed not as InvalidLockOptionsError(key): ${describeError(error)}`);
        continue;
      }
      try {
        const other = await b.locks.tryAcquire(key, opts({ ttl: 5_000 }));
        if (other) findings.push(`${name}: two holders (B's tryAcquire succeeded while A holds it)`);
        await other?.release();
        const t = await b.locks.tryAcquire(twin, opts({ ttl: 5_000 })).catch((e: unknown) => e as Error);
        if (t === null) findings.push(`${name}: its look-alike ${JSON.stringify(twin.slice(0, 40))} is busy too (keys collide)`);
        if (t instanceof Error && !(t instanceof InvalidLockOptionsError)) findings.push(`${name}: look-alike acquire ${describeError(t)}`);
        if (t && !(t instanceof Error)) await t.release();
        const info = await b.locks.inspect(key, { backend }).catch((e: unknown) => e as Error);
        if (info === null || info instanceof Error) findings.push(`${name}: inspect ${info === null ? 'null while held' : describeError(info)}`);
        const listed = await b.locks.list({ backend }, { prefix: key, limit: 10 }).catch((e: unknown) => e as Error);
        if (listed instanceof Error) findings.push(`${name}: list(prefix) ${describeError(listed)}`);
        else if (!listed.some((i) => i.key === key)) findings.push(`${name}: list(prefix=key) does not show it (${listed.map((i) => JSON.stringify(i.key.slice(0, 40))).join(', ')})`);
        // Hand-off to a waiter.
        const waiting = b.locks.acquire(key, opts({ ttl: 20_000, wait: 8_000 })).catch((e: unknown) => e as Error);
        await new Promise((r) => setTimeout(r, 200));
        await lease.release();
        lease = undefined;
        const got = await waiting;
        if (got instanceof Error) {
          findings.push(`${name}: waiter not handed the key: ${describeError(got)}`);
          continue;
        }
        // Force release: the holder is told, the key is free.
        const forced = await a.locks.forceRelease(key, { backend }).catch((e: unknown) => e as Error);
        if (forced !== true) findings.push(`${name}: forceRelease → ${forced instanceof Error ? describeError(forced) : String(forced)}`);
        await new Promise((r) => setTimeout(r, 300));
        if (!got.signal.aborted) findings.push(`${name}: force-released holder's signal not aborted after 300 ms`);
        const again = await a.locks.tryAcquire(key, opts({ ttl: 5_000 }));
        if (!again) findings.push(`${name}: not free after forceRelease`);
        await again?.release();
        await got.release().catch(() => undefined);
      } catch (error) {
        findings.push(`${name}: ${describeError(error)}`);
      } finally {
        await lease?.release().catch(() => undefined);
      }
    }
    expect(findings).toEqual([]);
  }, 180_000);
});
