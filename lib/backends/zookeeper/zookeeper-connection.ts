import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';

/** The parts of node-zookeeper-client's ConnectionManager the watchdog reads (internal, so optional). */
interface ConnectionManagerLike {
  state?: number;
  socket?: { destroyed?: boolean; connecting?: boolean; destroy(): void; on(event: 'data', listener: () => void): unknown };
  sessionTimeout?: number;
  connectTimeout?: number;
}

/** The part of the ConnectionManager that parses what the server sends (internal, so optional). */
interface ParserLike {
  onSocketData?: (buffer: Buffer) => void;
  pendingBuffer?: Buffer | null;
  socket?: { destroy(): void; listeners(event: 'data'): Array<(...args: unknown[]) => void>; removeListener(event: 'data', listener: (...args: unknown[]) => void): unknown; on(event: 'data', listener: (buffer: Buffer) => void): unknown };
  __ndlContained?: boolean;
}

/**
 * node-zookeeper-client parses the server's replies in its socket's `data` handler, and a reply it
 * cannot make sense of (an error code it does not know: seen in the simulation right after a
 * ZooKeeper server was killed and restarted, `Unknown code: -950599680`) throws there — an
 * uncaught exception that ends the application's process. Contained: such a reply resets the
 * connection instead, as the client itself does for a reply it does not expect (`socket.destroy()`:
 * its requests in flight fail with CONNECTION_LOSS, and it reconnects with its session). Applies to
 * the sockets the client opens from now on and to the one it has (whose handler was bound at its
 * connect()). Idempotent.
 */
export function containParseErrors(client: ZooKeeperClientLike): void {
  const manager = (client as { connectionManager?: ParserLike }).connectionManager;
  const parse = manager?.onSocketData;
  if (!manager || typeof parse !== 'function' || manager.__ndlContained) return;
  manager.__ndlContained = true;
  const guarded = function (this: ParserLike, buffer: Buffer): void {
    try {
      parse.call(this, buffer);
    } catch {
      this.pendingBuffer = null;
      this.socket?.destroy();
    }
  };
  manager.onSocketData = guarded;
  const socket = manager.socket;
  if (!socket || typeof socket.listeners !== 'function') return;
  // Its own handler is the socket's only bound one (`onSocketData.bind(manager)`, anonymous: "bound ").
  for (const listener of socket.listeners('data')) {
    if (!listener.name.startsWith('bound')) continue;
    socket.removeListener('data', listener);
    socket.on('data', guarded.bind(manager));
  }
}

/** ConnectionManager states: CONNECTING, CONNECTED, CONNECTED_READ_ONLY. */
const CONNECTING = 1;
const CONNECTED = 2;
const CONNECTED_READ_ONLY = 3;

/**
 * Repairs two gaps of node-zookeeper-client's connection handling, as ZooKeeper's Java client
 * does for itself; without them a client can wait forever on one server:
 * - **No handshake timeout.** Its connect timeout ends when TCP connects; if the server then never
 *   answers the session handshake (seen here against a server restarting under load: the client
 *   sat in CONNECTING for 10 s, its requests queued, until the server expired its session), it
 *   waits for good. A connection still in the handshake after the client's connect timeout (at most 2 s) is reset.
 * - **No read timeout.** It pings when it has sent nothing for a third of the session timeout, but
 *   never notices that the answers stopped (a server paused, a half-open link): a connection that
 *   has received nothing for two thirds of the session timeout is reset, and the client moves on to
 *   the next server of the ensemble with its session.
 * A reset is `socket.destroy()`: the client's own reconnect logic does the rest. Returns a function
 * that stops the watchdog. A reply the client cannot parse resets the connection too (containParseErrors).
 */
export function watchConnection(client: ZooKeeperClientLike): () => void {
  containParseErrors(client);
  const manager = (client as { connectionManager?: ConnectionManagerLike }).connectionManager;
  if (!manager) return () => undefined;
  const sessionMs = (): number => manager.sessionTimeout ?? client.getSessionTimeout();
  let lastRead = performance.now();
  let handshakeSince: number | undefined;
  let watched: unknown;
  const check = (): void => {
    const socket = manager.socket;
    if (!socket || socket.destroyed) return;
    if (socket !== watched) {
      watched = socket;
      lastRead = performance.now();
      socket.on('data', () => (lastRead = performance.now()));
    }
    const now = performance.now();
    if (manager.state === CONNECTING && socket.connecting === false) {
      handshakeSince ??= now;
      if (now - handshakeSince > Math.min(2_000, Math.max(500, manager.connectTimeout ?? sessionMs() / 3))) {
        handshakeSince = undefined;
        socket.destroy();
      }
      return;
    }
    handshakeSince = undefined;
    if ((manager.state === CONNECTED || manager.state === CONNECTED_READ_ONLY) && now - lastRead > (sessionMs() * 2) / 3) socket.destroy();
  };
  const timer = setInterval(check, Math.max(100, Math.floor(sessionMs() / 10)));
  timer.unref();
  return () => clearInterval(timer);
}

/** ConnectionManager state CLOSED. */
const CLOSED = -2;
/** After the client reports CLOSED, a reconnect already under way may still open a socket (within its spin delay): watch this long. */
const AFTER_CLOSED_MS = 300;

/**
 * Close a client of ours for good. `close()` alone asks the server to end the session and waits
 * for the answer with no limit: a server that does not answer (paused, stuck in a handshake, a
 * link that loses everything) would keep the connection open — and, for a client that never
 * connected, the process alive. After `graceMs` the connection is destroyed (the server then
 * expires the session by itself), and so is one the client opens after that (a reconnect already
 * under way). Resolves once the client is closed: at the latest `graceMs` + 1 s later.
 *
 * `awaited` (shutdown): the caller waits for this, so it keeps the process alive until then — else
 * a process with nothing else to do would exit in the middle of `app.close()`. In the background
 * (a lost session's client) it never does.
 */
export function closeClient(client: ZooKeeperClientLike, graceMs: number, awaited = false): Promise<void> {
  client.close();
  const manager = (client as { connectionManager?: ConnectionManagerLike }).connectionManager;
  if (!manager) return Promise.resolve();
  const started = performance.now();
  let closedAt: number | undefined;
  return new Promise((resolve) => {
    const check = (): void => {
      const now = performance.now();
      if (manager.state === CLOSED) closedAt ??= now;
      const socket = manager.socket;
      if ((closedAt !== undefined || now - started >= graceMs) && socket && !socket.destroyed) socket.destroy();
      if ((closedAt !== undefined && now - closedAt >= AFTER_CLOSED_MS) || now - started >= graceMs + 1_000) {
        clearInterval(timer);
        resolve();
      }
    };
    const timer = setInterval(check, 50);
    // In the background: a client with a connection left keeps the process alive, and this with it.
    if (!awaited) timer.unref();
    check();
  });
}
