import type { AcquireResult } from '../lock-backend.interface.js';
import type { LossListeners } from '../loss-listeners.js';
import type { EtcdAdmin } from './etcd-admin.js';
import type { EtcdQueue } from './etcd-queue.js';
import type { HandOff } from './etcd-requests.util.js';
import type { EtcdSession } from './etcd-session.js';
import type { EtcdSessions } from './etcd-sessions.js';

export interface EtcdHoldersParts {
  readonly admin: EtcdAdmin;
  readonly sessions: EtcdSessions;
  readonly queued: EtcdQueue;
  readonly lossListeners: LossListeners;
  /** After bootstrap: the forced-release watch may keep the process alive. */
  readonly holdsProcess: () => boolean;
}

/**
 * Who holds what in one etcd backend: owner → the session its key rides on. A grant starts the
 * forced-release watch; the last hold gone lets it idle; a lost session or a forced release tells
 * the holders' loss listeners.
 */
export class EtcdHolders {
  private readonly holding = new Map<string, EtcdSession>();
  /** A plain holder's successor at its grant, handed the lock at its release (etcd-requests.util handOffTxn). */
  private readonly handOffs = new Map<string, HandOff>();

  constructor(private readonly parts: EtcdHoldersParts) {}

  /** The owners holding here (see LockBackend.bookkeeping). */
  owners(): string[] {
    return [...new Set([...this.holding.keys(), ...this.handOffs.keys()])];
  }

  /** The successor `owner` (holding) hands the lock to at its release, if known. */
  handOffOf(owner: string): HandOff | undefined {
    return this.holding.has(owner) ? this.handOffs.get(owner) : undefined;
  }

  /** The session `owner`'s held key rides on. */
  sessionOf(owner: string): EtcdSession | undefined {
    return this.holding.get(owner);
  }

  /**
   * Until when the session lease `owner`'s key rides on is known to live (monotonic): the lock
   * cannot be trusted past it whatever its own ttl, since etcd deletes the key with the lease.
   */
  validUntil(owner: string): number | undefined {
    const session = this.holding.get(owner);
    return session && !session.lost ? session.validUntilMs : undefined;
  }

  granted(owner: string, session: EtcdSession, token: bigint, handOff?: HandOff): AcquireResult {
    session.holders.add(owner);
    this.holding.set(owner, session);
    if (handOff) this.handOffs.set(owner, handOff);
    // Not before bootstrap (nor during shutdown): the watch's stream would keep the process alive.
    if (this.parts.holdsProcess()) this.parts.admin.watch(token);
    return { acquired: true, token };
  }

  /** `owner` holds no more (released or forced): its session may end once drained. */
  remove(owner: string): EtcdSession | undefined {
    const session = this.holding.get(owner);
    this.holding.delete(owner);
    this.handOffs.delete(owner);
    if (this.holding.size === 0) this.parts.admin.idle();
    if (!session) return undefined;
    session.holders.delete(owner);
    this.parts.sessions.endIfDrained(session);
    return session;
  }

  /** `owner`'s key was deleted by a forced release: if it holds here, it holds no more. */
  forced(owner: string): void {
    if (!this.holding.has(owner)) return;
    this.remove(owner);
    this.parts.lossListeners.tell(owner, 'ended by forceRelease()', 'force-released');
  }

  /** The session's keys are gone: its holders lose their leases, its waiters re-queue on a new one. */
  sessionLost(session: EtcdSession, detail: string): void {
    const holders = [...session.holders];
    session.holders.clear();
    for (const owner of holders) {
      this.holding.delete(owner);
      this.handOffs.delete(owner);
      this.parts.lossListeners.tell(owner, detail);
    }
    if (this.holding.size === 0) this.parts.admin.idle();
    for (const owner of [...session.waiters]) this.parts.queued.wake(owner);
  }
}
