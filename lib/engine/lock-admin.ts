import type { HeldLock, LockBackend } from '../backends/lock-backend.interface.js';
import { monotonicNow } from '../common/validity.util.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockInfo } from '../interfaces/lock-info.interface.js';
import type { LeaseCore } from './lease-core.js';
import type { LeaseRegistry } from './lease-registry.js';
import type { LockEvents } from './lock-events.js';

/**
 * What an operator does to a key whoever holds it: look at its hold (`inspect`) and end it
 * (`forceRelease`). A holder in this process is told at once; in another, through its backend
 * (see `LockBackend.forceRelease`).
 */
export class LockAdmin {
  constructor(
    private readonly backends: ReadonlyMap<string, LockBackend>,
    private readonly registry: LeaseRegistry,
    private readonly events: LockEvents,
  ) {}

  async inspect(key: string, backendName: string, where: string): Promise<LockInfo | null> {
    const backend = this.backends.get(backendName)!;
    if (!backend.inspect) throw new InvalidLockOptionsError('backend', `backend "${backendName}" cannot inspect locks (it has no inspect())`, where);
    const held = await backend.inspect(key);
    return held && this.describe(key, backendName, held, this.localHolders(backendName));
  }

  /**
   * The keys held on a backend whose name starts with `prefix`, newest first, at most `limit`: the
   * backend names them (at most LIST_SCAN_MAX), each is inspected (LIST_CONCURRENCY at a time), and
   * those still held are sorted newest first by what every entry has (see newestFirst).
   */
  async list(backendName: string, prefix: string, limit: number, where: string): Promise<LockInfo[]> {
    const backend = this.backends.get(backendName)!;
    if (!backend.listKeys || !backend.inspect) {
      throw new InvalidLockOptionsError('backend', `backend "${backendName}" cannot list locks (it has no listKeys() and inspect())`, where);
    }
    const inspect = backend.inspect.bind(backend);
    const names = await backend.listKeys(prefix, LIST_SCAN_MAX);
    const local = this.localHolders(backendName);
    const found: LockInfo[] = [];
    for (let i = 0; i < names.length; i += LIST_CONCURRENCY) {
      const batch = names.slice(i, i + LIST_CONCURRENCY);
      const held = await Promise.all(batch.map((key) => inspect(key)));
      held.forEach((h, j) => h && found.push(this.describe(batch[j], backendName, h, local)));
    }
    return newestFirst(found).slice(0, limit);
  }

  /** What the backend reports of a hold, with what this process knows of it when it holds it. */
  private describe(key: string, backendName: string, held: HeldLock, local: Map<string, LeaseCore>): LockInfo {
    const shared = held.permits !== undefined || held.mode === 'read';
    const core = (held.owner === undefined ? undefined : this.registry.byOwner(held.owner)) ?? (shared ? local.get(key) : undefined);
    // etcd keeps no token on the server: its holder knows it, and may be in this process.
    const token = held.token ?? core?.token;
    const heldForMs = held.heldForMs ?? (core ? Math.max(0, Math.floor(monotonicNow() - core.acquiredAt)) : undefined);
    return {
      key,
      backend: backendName,
      remainingMs: held.remainingMs,
      waiters: held.waiters,
      ...(token === undefined ? {} : { token }),
      ...(heldForMs === undefined ? {} : { heldForMs }),
      ...(core ? { purpose: core.purpose, local: true } : {}),
      ...(held.permits === undefined ? {} : { permits: held.permits, holders: held.holders ?? 1 }),
      ...(held.mode === undefined ? {} : { mode: held.mode }),
      ...(held.mode === 'read' ? { readers: held.readers ?? 1 } : {}),
    };
  }

  /**
   * This process's leases on a backend, by key: a semaphore's holders and a key's readers carry no
   * owner in the backend's report, so one of this process's permits or reads on the key stands for them.
   */
  private localHolders(backendName: string): Map<string, LeaseCore> {
    const local = new Map<string, LeaseCore>();
    for (const core of this.registry.all()) {
      if (core.backendName === backendName && core.state === 'held' && (core.permits > 1 || core.mode === 'read' || core.mode === 'upgradeable')) local.set(core.key, core);
    }
    return local;
  }

  async forceRelease(key: string, backendName: string, where: string): Promise<boolean> {
    const backend = this.backends.get(backendName)!;
    if (!backend.forceRelease) throw new InvalidLockOptionsError('backend', `backend "${backendName}" cannot force a release (it has no forceRelease())`, where);
    // A semaphore's (or a key's readers') forced release ends every holder, and the backend answers with
    // one of them: the others held here are known now — those granted before the call (a later grant is not ended by it).
    const permitHolders = this.registry
      .all()
      .filter((core) => core.backendName === backendName && core.key === key && (core.permits > 1 || core.mode !== 'write') && core.state === 'held');
    const owner = await backend.forceRelease(key);
    this.events.emit('force-released', { key, backend: backendName, released: owner !== undefined });
    if (owner === undefined) return false;
    // Held here: told now, whatever the backend's own way of telling its holders.
    const detail = `forceRelease(${JSON.stringify(key)}) ended it`;
    this.registry.lose(owner, 'force-released', detail);
    for (const core of permitHolders) if (core.owner !== owner) this.registry.lose(core.owner, 'force-released', detail);
    return true;
  }
}

/** At most this many names a backend is asked for: `list()` sorts what it finds, so it reads them all. */
export const LIST_SCAN_MAX = 10_000;
/** Inspections in flight at once (a Redlock inspection is one call per master, each with its short node timeout). */
const LIST_CONCURRENCY = 16;

/**
 * Newest first, by one measure every entry has — mixing measures would rank this process's own
 * holds (whose hold time it knows) before another's later grant: by token when all have one
 * (tokens grow with every grant on a backend), else by hold time when all have it, else by the
 * time left (the latest granted or renewed first: all a server without either keeps).
 */
function newestFirst(found: LockInfo[]): LockInfo[] {
  const byKey = (a: LockInfo, b: LockInfo): number => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
  if (found.every((info) => info.token !== undefined)) return found.sort((a, b) => (a.token! > b.token! ? -1 : a.token! < b.token! ? 1 : byKey(a, b)));
  if (found.every((info) => info.heldForMs !== undefined)) return found.sort((a, b) => a.heldForMs! - b.heldForMs! || byKey(a, b));
  return found.sort((a, b) => b.remainingMs - a.remainingMs || byKey(a, b));
}
