import { randomUUID } from 'node:crypto';
import type { LockBackend } from '../../backends/lock-backend.interface.js';
import { ADMIN_CHECKS, expectUnavailable } from './checks-admin.js';
import { CORE_CHECKS } from './checks-core.js';
import { QUEUE_CHECKS } from './checks-queue.js';
import { TOKEN_CHECKS } from './checks-tokens.js';
import { READ_WRITE_CHECKS } from './checks-read-write.js';
import type { ConformanceCheck } from './conformance-check.js';
import { CheckFailure, checkContext, describeError, outcome, settled, within } from './conformance-context.js';

export interface VerifyLockBackendOptions {
  /**
   * Make one instance of the backend, as one process would. Every instance it makes must share one
   * lock store (one server; for an in-memory backend, return the same object each time).
   */
  create: () => LockBackend | Promise<LockBackend>;
  /**
   * Optional: make an instance whose server does not answer (a port nobody listens on, a proxy
   * that drops everything). Without it, `unreachable-bounded` is skipped.
   */
  unreachable?: () => LockBackend | Promise<LockBackend>;
  /** How many instances to make (≥ 2). @default 3 */
  instances?: number;
  /** The ttl of the checks' leases, ms. @default 10000 */
  ttlMs?: number;
  /** On a backend that claims `fairQueue`: how soon a waiter must learn the key is free, ms. @default 2000 */
  wakeWithinMs?: number;
  /** An unreachable server: how soon each call must reject with LockBackendUnavailableError, ms. @default 10000 */
  unavailableWithinMs?: number;
  /** The longest one check may take before it is reported failed, ms. @default 60000 */
  checkTimeoutMs?: number;
  /** Where the checks' keys live (each check adds its own name). @default `conformance:<random>:` */
  keyPrefix?: string;
  /** Run only the checks with these names (the rest are reported skipped). */
  only?: readonly string[];
}

/** One entry per check, by name (the names are stable). */
export interface BackendConformanceReport {
  passed: string[];
  failed: Array<{ check: string; reason: string }>;
  /** Checks of a capability the backend does not claim (or of a hook not given, or left out by `only`). */
  skipped: string[];
}

/** Every check `verifyLockBackend` runs, in order, with what each one checks. */
export const CONFORMANCE_CHECKS: ReadonlyArray<Pick<ConformanceCheck, 'name' | 'about'>> = [
  ...CORE_CHECKS,
  ...QUEUE_CHECKS,
  ...TOKEN_CHECKS,
  ...READ_WRITE_CHECKS,
  ...ADMIN_CHECKS,
  { name: 'unreachable-bounded', about: 'against a server that does not answer, acquire, extend, release and inspect reject with LockBackendUnavailableError within unavailableWithinMs' },
  { name: 'bookkeeping-drains', about: "after every hold was given back, each instance's bookkeeping() records (if it has the method) are back within 10 s to what they held after one warm-up lock: nothing kept per owner (records named *Cache aside)" },
  { name: 'nothing-left-behind', about: 'after the checks, a fresh instance finds every key they used free: no key, queue entry or semaphore holder left over' },
  { name: 'close', about: 'close() of every instance resolves within 10 s' },
].map(({ name, about }) => ({ name, about }));

/**
 * Hold a backend to the `LockBackend` contract: exclusion, owner-checked extend and release, never
 * deleting another owner's key, queued waiters served (in order, without polling, where
 * `fairQueue` says so), growing tokens (`fencing`), semaphores (`semaphore`), all-or-nothing
 * `acquireAll`, `inspect`/`listKeys`/`forceRelease` consistent with the holds, bounded failures
 * when the server is unreachable, nothing left behind. Works in any test runner: it never throws
 * for a failing backend; every check's outcome is in the report.
 *
 * @example
 * const report = await verifyLockBackend({ create: () => new MyBackend({ url }) });
 * expect(report.failed).toEqual([]);
 */
export async function verifyLockBackend(options: VerifyLockBackendOptions): Promise<BackendConformanceReport> {
  const settings = {
    instances: Math.max(2, Math.floor(options.instances ?? 3)),
    ttlMs: options.ttlMs ?? 10_000,
    wakeWithinMs: options.wakeWithinMs ?? 2_000,
    unavailableWithinMs: options.unavailableWithinMs ?? 10_000,
    checkTimeoutMs: options.checkTimeoutMs ?? 60_000,
    keyPrefix: options.keyPrefix ?? `conformance:${randomUUID().slice(0, 8)}:`,
  };
  const report: BackendConformanceReport = { passed: [], failed: [], skipped: [] };
  const wanted = (name: string): boolean => !options.only || options.only.includes(name);
  const made: LockBackend[] = [];
  const make = async (factory: () => LockBackend | Promise<LockBackend>): Promise<LockBackend> => {
    const backend = await factory();
    made.push(backend);
    return backend;
  };
  const instances: LockBackend[] = [];
  try {
    for (let i = 0; i < settings.instances; i++) instances.push(await make(options.create));
  } catch (error) {
    for (const { name } of CONFORMANCE_CHECKS) report.failed.push({ check: name, reason: `create() failed: ${describeError(error)}` });
    await closeAll(made, report, false);
    return report;
  }
  for (const backend of instances) backend.holdProcess?.(true);
  const baselines = wanted('bookkeeping-drains') ? await outcome(warmBaselines(instances, settings.keyPrefix)) : undefined;
  const usedKeys = new Set<string>();
  for (const check of [...CORE_CHECKS, ...QUEUE_CHECKS, ...TOKEN_CHECKS, ...READ_WRITE_CHECKS, ...ADMIN_CHECKS]) {
    if (!wanted(check.name) || check.skipUnless?.(instances[0], { unreachable: !!options.unreachable }) !== undefined) {
      report.skipped.push(check.name);
      continue;
    }
    const context = checkContext(instances, settings, check.name, usedKeys);
    const result = await outcome(within(settings.checkTimeoutMs, `check ${check.name}`, check.run(context)));
    await within(settings.checkTimeoutMs, 'giving back the holds', context.giveBack()).catch(() => undefined);
    if (result.error === undefined) report.passed.push(check.name);
    else report.failed.push({ check: check.name, reason: reasonOf(result.error) });
  }
  const drains = baselines && instances.some((backend) => backend.bookkeeping) ? 'bookkeeping-drains' : undefined;
  await runNamed(report, drains, 'bookkeeping-drains', settings.checkTimeoutMs, async () => {
    if (baselines!.error !== undefined) throw new CheckFailure(`the warm-up lock before the checks failed: ${describeError(baselines!.error)}`);
    await bookkeepingDrains(instances, baselines!.value!);
  });
  await runNamed(report, wanted('unreachable-bounded') && options.unreachable ? 'unreachable-bounded' : undefined, 'unreachable-bounded', settings.checkTimeoutMs, async () => {
    const backend = await make(options.unreachable!);
    await unreachableBounded(backend, settings.keyPrefix, settings.unavailableWithinMs);
  });
  await runNamed(report, wanted('nothing-left-behind') ? 'nothing-left-behind' : undefined, 'nothing-left-behind', settings.checkTimeoutMs, async () => {
    const fresh = await make(options.create);
    await nothingLeftBehind(fresh, [...usedKeys]);
  });
  await closeAll(made, report, wanted('close'));
  return report;
}

function reasonOf(error: unknown): string {
  return error instanceof CheckFailure ? error.message : `threw ${describeError(error)}`;
}

async function runNamed(report: BackendConformanceReport, run: string | undefined, name: string, timeoutMs: number, body: () => Promise<void>): Promise<void> {
  if (run === undefined) {
    report.skipped.push(name);
    return;
  }
  const result = await outcome(within(timeoutMs, `check ${name}`, body()));
  if (result.error === undefined) report.passed.push(name);
  else report.failed.push({ check: name, reason: reasonOf(result.error) });
}

async function unreachableBounded(backend: LockBackend, prefix: string, withinMs: number): Promise<void> {
  const key = `${prefix}unreachable`;
  const owner = `conformance:${randomUUID()}`;
  const calls: Array<[string, () => Promise<unknown>]> = [
    ['acquire()', () => backend.acquire({ key, owner, ttlMs: 10_000, queue: false })],
    ['extend()', () => backend.extend(key, owner, 10_000)],
    ['release()', () => backend.release(key, owner)],
  ];
  if (backend.inspect) calls.push(['inspect()', () => backend.inspect!(key)]);
  for (const [operation, call] of calls) {
    const started = performance.now();
    const result = await within(withinMs, `${operation} against an unreachable server`, outcome(call()));
    // A backend may know without asking that an owner it never granted holds nothing.
    if ((operation === 'extend()' || operation === 'release()') && result.error === undefined && result.value === false) continue;
    expectUnavailable(result.error, `${operation} (after ${Math.round(performance.now() - started)} ms)`);
  }
}

type Records = Readonly<Record<string, readonly string[]>>;

/** One lock taken and given back on each instance (sessions and connections open), then what each keeps. */
async function warmBaselines(instances: readonly LockBackend[], prefix: string): Promise<Array<Records | undefined>> {
  const out: Array<Records | undefined> = [];
  for (const [i, backend] of instances.entries()) {
    const key = `${prefix}warm-up-${i}`;
    const owner = `conformance:${randomUUID()}`;
    if ((await settled(await backend.acquire({ key, owner, ttlMs: 10_000, queue: false }))).acquired) await backend.release(key, owner);
    out.push(backend.bookkeeping?.());
  }
  return out;
}

/** Every record not named *Cache back to its warm-up size, polled for up to 10 s. */
async function bookkeepingDrains(instances: readonly LockBackend[], baselines: ReadonlyArray<Records | undefined>): Promise<void> {
  const over = (): string[] =>
    instances.flatMap((backend, i) =>
      Object.entries(backend.bookkeeping?.() ?? {}).flatMap(([name, entries]) => {
        const before = baselines[i]?.[name]?.length ?? 0;
        if (name.endsWith('Cache') || entries.length <= before) return [];
        return [`instance ${i + 1}: ${name} has ${entries.length} (${before} after the warm-up): ${entries.slice(0, 3).map((e) => JSON.stringify(e.slice(0, 80))).join(', ')}`];
      }),
    );
  const deadline = performance.now() + 10_000;
  let left = over();
  while (left.length > 0 && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    left = over();
  }
  if (left.length > 0) throw new CheckFailure(`records still held 10 s after every hold was given back: ${left.join('; ')}`);
}

async function nothingLeftBehind(backend: LockBackend, keys: readonly string[]): Promise<void> {
  const left: string[] = [];
  for (const key of keys) {
    const owner = `conformance:${randomUUID()}`;
    const attempt = await outcome(backend.acquire({ key, owner, ttlMs: 5_000, queue: false }).then(settled));
    if (attempt.value?.acquired) await backend.release(key, owner);
    else left.push(attempt.error ? `${key} (${describeError(attempt.error)})` : key);
  }
  if (left.length > 0) {
    const named = left.slice(0, 5).map((k) => JSON.stringify(k.slice(0, 160))).join(', ');
    throw new CheckFailure(`${left.length} of ${keys.length} keys the checks used were refused to a fresh instance after every hold was given back: ${named}`);
  }
}

async function closeAll(made: readonly LockBackend[], report: BackendConformanceReport, counted: boolean): Promise<void> {
  const failures: string[] = [];
  for (const backend of new Set(made)) {
    const result = await outcome(within(10_000, 'close()', backend.close()));
    if (result.error !== undefined) failures.push(describeError(result.error));
  }
  if (!counted) return;
  if (failures.length === 0) report.passed.push('close');
  else report.failed.push({ check: 'close', reason: failures.join('; ') });
}
