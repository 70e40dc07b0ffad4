import { randomUUID } from 'node:crypto';
import { checkout } from './pg-checkout.js';
import type { PgPoolClientLike, PgPoolLike } from './postgres-client.interface.js';

/** The NOTIFY of a forced release: '!lost <owner>'. */
const LOST = '!lost ';
/** A semaphore waiter's wake-up: '!sem <owner>' (the whole rest is the owner; ask again). */
const SEMAPHORE_TURN = '!sem ';

/** Why LISTEN/NOTIFY cannot serve: a transaction pooler hands LISTEN's session to someone else. */
export class NotifyUnreachableError extends Error {}

/**
 * The one session connection that LISTENs for hand-off wake-ups ("<owner> <reservation ms>
 * <token>"; an earlier version sent no token) and passes them to `onWake`. It reconnects by itself (an unref'd timer, 100 ms doubling to 2 s); while it is
 * down a waiter still re-checks every heartbeat, so a lost wake-up only costs time.
 *
 * At its first connection it checks that a NOTIFY sent through the pool reaches it: behind a
 * pooler in transaction mode (PgBouncer's default) the LISTEN would silently hear nothing.
 */
export class PostgresListener {
  private client?: PgPoolClientLike;
  private connecting?: Promise<void>;
  private retry?: NodeJS.Timeout;
  private backoffMs = 100;
  private closed = false;
  private readonly probes = new Map<string, () => void>();

  /** LISTEN probes in flight (see LockBackend.bookkeeping). */
  probeIds(): string[] {
    return [...this.probes.keys()];
  }

  constructor(
    private readonly pool: PgPoolLike,
    private readonly channel: string,
    private readonly onWake: (owner: string, reservedMs: number, token?: bigint) => void,
    private readonly probeTimeoutMs: number,
    /** '!lost <owner>': an operator's forceRelease() ended that owner's lease. */
    private readonly onLost: (owner: string) => void = () => undefined,
    /** '!sem <owner>': a semaphore permit may be free for that waiter. */
    private readonly onTurn: (owner: string) => void = () => undefined,
  ) {}

  /** Connect and LISTEN (once; later calls share it). Rejects with NotifyUnreachableError behind a transaction pooler. */
  start(): Promise<void> {
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.connecting?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    client.removeAllListeners('notification');
    client.removeAllListeners('error');
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    // The session ends with the connection: its LISTEN goes with it.
    client.release(true);
  }

  private async connect(): Promise<void> {
    if (this.closed || this.client) return;
    const checked = await checkout(this.pool);
    const { client } = checked;
    if (this.closed) {
      client.release(true);
      return;
    }
    client.on('notification', (message) => this.notified(message.payload ?? ''));
    // A session that dies while it is being set up fails the set-up at once: otherwise the probe
    // would wait out its timeout (seconds without LISTEN) for a notification that cannot come.
    let died!: (error: Error) => void;
    const dead = new Promise<never>((_, reject) => (died = reject));
    dead.catch(() => undefined);
    const lost = (): void => {
      died(new Error('the LISTEN session ended while it was set up'));
      this.lost(client);
    };
    client.on('error', lost);
    client.on('end', lost);
    checked.unguard();
    // Died between the checkout and here: heard by the guard, told now.
    if (checked.error()) lost();
    try {
      await Promise.race([client.query(`LISTEN "${this.channel}"`).then(() => this.probe()), dead]);
    } catch (error) {
      client.removeAllListeners('notification');
      client.release(true);
      throw error;
    }
    this.client = client;
    this.backoffMs = 100;
    // Never keeps the process alive (see PostgresBackend.holdProcess): every wait runs on a timer of its own.
    (client as { connection?: { stream?: { unref?(): void } } }).connection?.stream?.unref?.();
  }

  /** A NOTIFY through the pool must reach this session within the timeout. */
  private probe(): Promise<void> {
    const id = `probe:${randomUUID()}`;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.probes.delete(id);
        reject(
          new NotifyUnreachableError(
            `a NOTIFY sent through the pool did not reach the LISTEN session within ${this.probeTimeoutMs} ms: a pooler in ` +
              'transaction mode (PgBouncer) does not keep a session for LISTEN. Connect this backend to PostgreSQL directly or ' +
              'through a session-mode pool',
          ),
        );
      }, this.probeTimeoutMs);
      this.probes.set(id, () => {
        clearTimeout(timer);
        this.probes.delete(id);
        resolve();
      });
      this.pool.query('SELECT pg_notify($1, $2)', [this.channel, id]).catch((error: unknown) => {
        clearTimeout(timer);
        this.probes.delete(id);
        reject(error);
      });
    });
  }

  private notified(payload: string): void {
    const probe = this.probes.get(payload);
    if (probe) return probe();
    if (payload.startsWith(LOST)) return this.onLost(payload.slice(LOST.length));
    if (payload.startsWith(SEMAPHORE_TURN)) return this.onTurn(payload.slice(SEMAPHORE_TURN.length));
    const [owner, ms, token] = payload.split(' ');
    this.onWake(owner, Number(ms) || 0, token && /^\d+$/.test(token) ? BigInt(token) : undefined);
  }

  private lost(client: PgPoolClientLike): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.removeAllListeners('notification');
    client.removeAllListeners('error');
    client.on('error', () => undefined);
    client.release(true);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    clearTimeout(this.retry);
    this.retry = setTimeout(() => {
      this.start().catch(() => this.scheduleReconnect());
    }, this.backoffMs);
    this.retry.unref();
    this.backoffMs = Math.min(2_000, this.backoffMs * 2);
  }
}
