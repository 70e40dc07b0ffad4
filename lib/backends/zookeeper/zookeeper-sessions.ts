import { monotonicNow } from '../../common/validity.util.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { ZooKeeperBackendConfig } from './zookeeper-backend.options.js';
import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';
import { closeClient, watchConnection } from './zookeeper-connection.js';
import type { ZooKeeperRequests } from './zookeeper-requests.js';
import { ZooKeeperSession } from './zookeeper-session.js';

export interface ZooKeeperSessionsConfig {
  readonly name: string;
  readonly prefix: string;
  readonly driftFactor: number;
  /** How long a client of ours may take to close politely before its connection is destroyed (the command timeout). */
  readonly closeGraceMs: number;
  /** The backend's clients: the application's one, or ours (`ownsClient`, replaced with `reconnect`). */
  readonly clients: Pick<ZooKeeperBackendConfig, 'client' | 'ownsClient' | 'reconnect'>;
  readonly requests: ZooKeeperRequests;
  closed(): boolean;
  /** A session is over or presumed over: tell its holders, wake its waiters. */
  lost(session: ZooKeeperSession, detail: string): void;
}

/**
 * The sessions of one ZooKeeper backend: the current one new znodes go on, opened on first use and
 * replaced once lost. A client this backend owns is closed with its session (its znodes go at once
 * if the server hears it) and a new one opened for the next; an application's client keeps its
 * connection and gets a new session record (its old znodes are deleted as they can be).
 */
export class ZooKeeperSessions {
  private current?: ZooKeeperSession;
  private opening?: Promise<ZooKeeperSession>;
  /** A backend that owns its clients may be built with its first one, connected. */
  private firstClient?: ZooKeeperClientLike;
  /** Stops listening to the current session's client. */
  private detach?: () => void;

  constructor(private readonly config: ZooKeeperSessionsConfig) {
    const { clients } = config;
    this.firstClient = clients.ownsClient ? clients.client : undefined;
    if (!clients.ownsClient && !clients.client) throw new Error('ZooKeeperBackend: a backend that does not own its client needs one (config.client)');
    if (clients.ownsClient && !clients.client && !clients.reconnect) throw new Error('ZooKeeperBackend: a backend that owns its clients needs config.reconnect');
  }

  /** The session new znodes go on (opened, or replaced, first if need be). */
  get(key: string): Promise<ZooKeeperSession> {
    if (this.current && !this.current.lost) return Promise.resolve(this.current);
    this.opening ??= this.open(key).finally(() => (this.opening = undefined));
    return this.opening;
  }

  /** The owners holding on the current session (see LockBackend.bookkeeping). */
  holders(): string[] {
    return [...(this.current?.holders ?? [])];
  }

  /** The client of the current session while it is not lost (for the lines' sweep). */
  liveClient(): ZooKeeperClientLike | undefined {
    return this.current?.lost === false ? this.current.client : undefined;
  }

  /** Our own connections never keep the process alive (calls in flight do, through their timers). */
  unref(): void {
    if (this.config.clients.ownsClient && this.current) unrefClient(this.current.client);
  }

  /**
   * `session` is over: stop trusting it and, if it is the current one, stop listening to its
   * client; a client of ours is closed. false: it was over already.
   */
  retire(session: ZooKeeperSession): boolean {
    if (session.lost) return false;
    session.end();
    if (this.current === session) {
      this.current = undefined;
      this.detach?.();
    }
    if (this.config.clients.ownsClient) void closeClient(session.client, this.config.closeGraceMs);
    return true;
  }

  /** Shutting down, after the backend refuses new calls: a session being opened settles first. */
  async settle(): Promise<void> {
    await this.opening?.catch(() => undefined);
  }

  /** End the current session for shutdown (its client stays open for `closeClient`); the session, if any. */
  end(): ZooKeeperSession | undefined {
    const session = this.current;
    this.current = undefined;
    session?.end();
    this.detach?.();
    return session;
  }

  /**
   * The last requests of shutdown, on `session`'s client — or, after a lost session, the
   * application's client, or a new one of ours opened only when `needed` — then a client of ours
   * is closed.
   */
  async closeWith(session: ZooKeeperSession | undefined, needed: boolean, last: (client: ZooKeeperClientLike) => Promise<unknown>): Promise<void> {
    const { clients } = this.config;
    const client = !clients.ownsClient
      ? clients.client
      : (session?.client ?? this.takeFirstClient() ?? (needed && clients.reconnect ? await clients.reconnect().catch(() => undefined) : undefined));
    if (!client) return;
    await last(client);
    if (clients.ownsClient) await closeClient(client, this.config.closeGraceMs, true);
  }

  private async open(key: string): Promise<ZooKeeperSession> {
    const { name, requests, prefix, clients } = this.config;
    const closedError = (): Error => new LockBackendUnavailableError(name, 'acquire', 'the backend is closed (application shutting down)', { key });
    if (this.config.closed()) throw closedError();
    const owned = clients.ownsClient;
    // The application's client is always the one it gave us; ours is a new one per session.
    const client = owned ? (this.takeFirstClient() ?? (await clients.reconnect!())) : clients.client!;
    if (owned) unrefClient(client);
    try {
      if (!owned && isDeadClient(client)) {
        throw new LockBackendUnavailableError(
          name,
          'acquire',
          'the session of the ZooKeeper client the application passed (zookeeper.client) expired (or the client was closed), and such a client cannot reconnect: restart the application with a new client, or configure zookeeper.connectionString so the module replaces expired sessions itself',
          { key },
        );
      }
      if (this.config.closed()) throw closedError();
      const sentAt = monotonicNow();
      // Proof of life, and the send time the session's validity counts from.
      await requests.exists(client, key, prefix, 'acquire');
      if (this.config.closed()) throw closedError();
      return this.started(client, sentAt);
    } catch (error) {
      // A client of ours that did not become the session's is closed now: it would keep a
      // connection (and a session on the server) open for nothing, and the process alive.
      if (owned) void closeClient(client, this.config.closeGraceMs);
      throw error;
    }
  }

  /** The connected client a backend that owns its clients was built with, once. */
  private takeFirstClient(): ZooKeeperClientLike | undefined {
    const client = this.firstClient;
    this.firstClient = undefined;
    return client;
  }

  private started(client: ZooKeeperClientLike, sentAt: number): ZooKeeperSession {
    const { requests, prefix, driftFactor } = this.config;
    const session = new ZooKeeperSession(client, client.getSessionTimeout(), driftFactor, sentAt, (s, detail) => this.config.lost(s, detail), () => requests.exists(client, '', prefix));
    const onState = (state: { code?: number }): void => {
      if (state?.code === EXPIRED_STATE) this.config.lost(session, 'the ZooKeeper session expired');
    };
    const onConnected = (): void => session.regranted();
    client.on('state', onState);
    client.on('connected', onConnected);
    const unwatch = watchConnection(client);
    this.detach = () => {
      client.removeListener('state', onState);
      client.removeListener('connected', onConnected);
      unwatch();
    };
    this.current = session;
    return session;
  }
}

/** node-zookeeper-client's `State.EXPIRED` code. */
const EXPIRED_STATE = -122;

/**
 * An expired (or closed) client: it answers nothing again. Its own state says EXPIRED only for a
 * moment (it moves on to DISCONNECTED as its socket closes); its connection manager's stays.
 */
function isDeadClient(client: ZooKeeperClientLike): boolean {
  const managerState = (client as { connectionManager?: { state?: number } }).connectionManager?.state;
  return client.getState?.()?.code === EXPIRED_STATE || managerState === MANAGER_CLOSED || managerState === MANAGER_SESSION_EXPIRED;
}
/** node-zookeeper-client's ConnectionManager states CLOSED and SESSION_EXPIRED. */
const MANAGER_CLOSED = -2;
const MANAGER_SESSION_EXPIRED = -3;

/** Let the process exit whatever this client's connection does (a new socket per reconnect). */
export function unrefClient(client: ZooKeeperClientLike): void {
  const manager = (client as { connectionManager?: { socket?: { unref?(): void }; __ndlUnref?: boolean } }).connectionManager;
  manager?.socket?.unref?.();
  if (manager && !manager.__ndlUnref) {
    manager.__ndlUnref = true;
    client.on('connected', () => manager.socket?.unref?.());
    client.on('disconnected', () => manager.socket?.unref?.());
  }
}
