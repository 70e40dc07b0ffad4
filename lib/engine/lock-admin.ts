import type { LockBackend } from '../backends/lock-backend.interface.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockInfo } from '../interfaces/lock-info.interface.js';
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
    if (!held) return null;
    // etcd keeps no token on the server: its holder knows it, and may be in this process.
    const token = held.token ?? (held.owner === undefined ? undefined : this.registry.byOwner(held.owner)?.token);
    const info: LockInfo = { key, backend: backendName, remainingMs: held.remainingMs, waiters: held.waiters };
    const semaphore = held.permits === undefined ? {} : { permits: held.permits, holders: held.holders ?? 1 };
    return token === undefined ? { ...info, ...semaphore } : { ...info, token, ...semaphore };
  }

  async forceRelease(key: string, backendName: string, where: string): Promise<boolean> {
    const backend = this.backends.get(backendName)!;
    if (!backend.forceRelease) throw new InvalidLockOptionsError('backend', `backend "${backendName}" cannot force a release (it has no forceRelease())`, where);
    const owner = await backend.forceRelease(key);
    this.events.emit('force-released', { key, backend: backendName, released: owner !== undefined });
    if (owner === undefined) return false;
    // Held here: told now, whatever the backend's own way of telling its holders.
    this.registry.byOwner(owner)?.lose('force-released', `forceRelease(${JSON.stringify(key)}) ended it`);
    return true;
  }
}
