import { monotonicNow } from '../../common/validity.util.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import { withTimeout } from '../backend-call.util.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import { EtcdSession } from './etcd-session.js';

/** Retry revoking a session we gave up (its keep-alives already stopped) this many ms later. */
const REVOKE_RETRY_DELAYS_MS = [1_000, 3_000, 10_000];

export interface EtcdSessionsConfig {
  readonly client: EtcdClientLike;
  readonly name: string;
  readonly sessionTtlSeconds: number;
  readonly commandTimeoutMs: number;
  readonly driftFactor: number;
  /** gRPC call options of a request (its deadline). */
  deadline(): { deadline: Date };
  /** The backend's bounded call. */
  call<T>(operation: string, key: string, send: () => Promise<T>): Promise<T>;
  closed(): boolean;
  /** A session is lost: tell its holders, wake its waiters. */
  lost(session: EtcdSession, detail: string): void;
}

/**
 * The session leases of one etcd backend: the current one new keys go on, and retired ones still
 * in use. A session is granted on first use, retired when a write on it had an unknown outcome
 * (revoked once unused), and lost when its keep-alives stop getting through.
 */
export class EtcdSessions {
  private current?: EtcdSession;
  /** Every session not yet ended: the current one and retired ones still in use. */
  private readonly live = new Set<EtcdSession>();
  private creating?: Promise<EtcdSession>;

  constructor(private readonly config: EtcdSessionsConfig) {}

  /** Sessions not ended (the current one, retired ones in use) and their holders and waiters (see LockBackend.bookkeeping). */
  bookkeeping(): Record<string, string[]> {
    const live = [...this.live];
    return {
      sessions: live.map((s) => String(s.id)),
      sessionHolders: live.flatMap((s) => [...s.holders]),
      sessionWaiters: live.flatMap((s) => [...s.waiters]),
    };
  }

  /** The session new keys go on. */
  get(key: string): Promise<EtcdSession> {
    if (this.current && !this.current.lost) return Promise.resolve(this.current);
    this.creating ??= this.create(key).finally(() => (this.creating = undefined));
    return this.creating;
  }

  private async create(key: string): Promise<EtcdSession> {
    const { client, name, sessionTtlSeconds, commandTimeoutMs, driftFactor } = this.config;
    if (this.config.closed()) throw new LockBackendUnavailableError(name, 'acquire', 'the backend is closed (application shutting down)', { key });
    const sentAt = monotonicNow();
    // Our own keep-alives (see EtcdSession), each bounded by a deadline.
    const lease = client.lease(sessionTtlSeconds, { autoKeepAlive: false, ...this.config.deadline() });
    const keepAlive = async (): Promise<number> => {
      // The gRPC deadline has the usual slack (a request cut at our own timeout counts against
      // etcd3's circuit breaker); we stop waiting at commandTimeoutMs either way.
      const response = await withTimeout(lease.keepaliveOnce(this.config.deadline()), commandTimeoutMs, () => new Error('keep-alive timed out'));
      return Number(response?.TTL ?? 0);
    };
    const session = new EtcdSession(lease, sessionTtlSeconds, driftFactor, sentAt, (s, detail) => this.lose(s, detail), keepAlive);
    try {
      const id = await this.config.call('grant', key, () => lease.grant());
      session.start(id);
    } catch (error) {
      session.end();
      lease.release();
      throw error;
    }
    if (session.lost) throw new LockBackendUnavailableError(name, 'grant', 'the new session lease was lost at once', { key });
    if (this.config.closed()) {
      session.end();
      void this.revoke(session, false);
      throw new LockBackendUnavailableError(name, 'acquire', 'the backend is closed (application shutting down)', { key });
    }
    this.current = session;
    this.live.add(session);
    return session;
  }

  /**
   * A write on `session` had an unknown outcome: a key of ours may land on it at any time. Put no
   * new keys on it, and revoke it once nobody holds, waits or writes on it — the revoke takes any
   * late key with it (and a put arriving after the revoke fails: no such lease).
   */
  retire(session: EtcdSession): void {
    if (session.lost || session.retired) return;
    session.retired = true;
    if (this.current === session) this.current = undefined;
    this.endIfDrained(session);
  }

  /** Retire the current session (the next acquisition grants a new one). */
  retireCurrent(): void {
    if (this.current) this.retire(this.current);
  }

  endIfDrained(session: EtcdSession): void {
    if (!session.retired || session.lost || !session.idle) return;
    session.end();
    this.live.delete(session);
    void this.revoke(session, true);
  }

  /** Every lease on this session is presumed lost; waiters re-queue under a new session. */
  lose(session: EtcdSession, detail: string): void {
    if (session.lost) return;
    session.end();
    this.live.delete(session);
    if (this.current === session) this.current = undefined;
    // Stop keep-alives; revoking frees our keys at once if etcd is reachable.
    void this.revoke(session, false);
    this.config.lost(session, detail);
  }

  /** End and revoke every session (shutdown): their keys go at once. */
  async closeAll(): Promise<void> {
    this.current = undefined;
    const sessions = [...this.live];
    this.live.clear();
    await Promise.all(
      sessions.map((session) => {
        session.end();
        return this.revoke(session, false);
      }),
    );
  }

  /**
   * Revoke an ended session: its keys go at once. revoke() stops the keep-alives first, so if
   * etcd cannot be reached the lease still expires by its TTL; with `retry`, a failed revoke is
   * tried again a few times meanwhile (a late put on the lease may be all that is left on it).
   */
  private async revoke(session: EtcdSession, retry: boolean): Promise<void> {
    const attempt = (): Promise<boolean> =>
      withTimeout(session.lease.revoke(this.config.deadline()), this.config.commandTimeoutMs, () => new Error('revoke timed out')).then(
        () => true,
        () => false,
      );
    if ((await attempt()) || !retry) return;
    for (const delay of REVOKE_RETRY_DELAYS_MS) {
      await new Promise((resolve) => setTimeout(resolve, delay).unref());
      if (await attempt()) return;
    }
  }
}
