import type { HoldKind, LockBackend, ReadMode, UpgradeResult } from './lock-backend.interface.js';

/**
 * `backend` as one read-write reader sees it: its acquisition asks for `mode`, and every call on
 * the hold says so (`HoldKind`) — until `upgrade()` succeeds, after which the hold is a writer's
 * (the plain lock's) and calls carry no mode. One per lease (it remembers the upgrade), passed to
 * the code that takes, renews and gives back leases, which then needs no notion of modes.
 */
export class ReaderBackend implements LockBackend {
  private hold: HoldKind;
  /** While an upgrade waits: the calls of `waitForTurn`. */
  private readonly upgrading: HoldKind = { mode: 'upgrade' };

  constructor(
    private readonly backend: LockBackend,
    private readonly mode: ReadMode,
  ) {
    this.hold = { mode };
  }

  get name(): string {
    return this.backend.name;
  }

  get capabilities(): LockBackend['capabilities'] {
    return this.backend.capabilities;
  }

  /** Whether the hold is still a reader's (not upgraded). */
  get reading(): boolean {
    return this.hold.mode !== undefined;
  }

  acquire: LockBackend['acquire'] = (request) => this.backend.acquire({ ...request, mode: this.mode });
  waitForTurn: LockBackend['waitForTurn'] = (key, owner, timeoutMs, signal) => this.backend.waitForTurn(key, owner, timeoutMs, signal, this.hold);
  extend: LockBackend['extend'] = (key, owner, ttlMs) => this.backend.extend(key, owner, ttlMs, this.hold.mode ? this.hold : undefined);
  release: LockBackend['release'] = (key, owner) => this.backend.release(key, owner, this.hold.mode ? this.hold : undefined);

  /** One upgrade attempt; once granted, the hold is a writer's. */
  async upgrade(key: string, owner: string, ttlMs: number): Promise<UpgradeResult> {
    const result = await this.backend.upgrade!(key, owner, ttlMs);
    if (result.upgraded) this.hold = {};
    return result;
  }

  /** Wait in `upgrade()` for the other readers to leave (see LockBackend.upgrade). */
  waitForUpgrade(key: string, owner: string, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.backend.waitForTurn(key, owner, timeoutMs, signal, this.upgrading);
  }

  checkKey = (key: string): void => this.backend.checkKey?.(key);
  inspect: LockBackend['inspect'] = (key) => this.backend.inspect!(key);
  listKeys: LockBackend['listKeys'] = (prefix, max) => this.backend.listKeys!(prefix, max);
  forceRelease: LockBackend['forceRelease'] = (key) => this.backend.forceRelease!(key);
  ping: LockBackend['ping'] = (timeoutMs) => this.backend.ping!(timeoutMs);
  validUntil: LockBackend['validUntil'] = (owner) => this.backend.validUntil?.(owner);
  // Losses reach the engine through the backend's own onLeaseLost; the backend is closed by its owner.
  close = async (): Promise<void> => undefined;
}

/** `backend` for a lease of `mode`: a reader's view of it, or the backend itself for a writer. */
export function withMode(backend: LockBackend, mode: ReadMode | 'write'): LockBackend {
  return mode === 'write' ? backend : new ReaderBackend(backend, mode);
}
