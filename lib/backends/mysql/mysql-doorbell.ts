import { allRows, text, type MySqlNames } from './mysql-sql.util.js';
import { ER, errnoOf, q, type MySqlConnectionLike, type MySqlPoolLike } from './mysql-client.interface.js';
import { sweepStatements } from './mysql-statements.js';

/** How long one wait of the listener lasts when nobody rings (a ring ends it at once). */
const WAIT_S = 10;
/** Mail older than this is a dead listener's: purged at every (re)connect and once a minute. */
const MAIL_LIFE_S = 60;

/**
 * Waking waiters without LISTEN/NOTIFY (MySQL and MariaDB have none). Each backend instance keeps
 * one listener connection, registered in `<prefix>_listeners` by its `CONNECTION_ID()`, which its
 * waiters record in their queue entries, and a second, idle connection that holds the named lock
 * `ndl.bell.<listener id>`. The listener reads its mail, then waits for that lock in one statement
 * that returns at once if mail is already there:
 *
 *   SELECT GET_LOCK('ndl.bell.<id>', 10) FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM <prefix>_mail WHERE listener = <id>)
 *
 * A procedure that hands a key to one of its waiters commits a mail line; the releasing process
 * then rings: `KILL QUERY <id>` ends the wait (ER_QUERY_INTERRUPTED) and the listener reads the
 * line. A line committed before the wait starts is seen by its `NOT EXISTS`; one committed after
 * it is delivered by the ring. A lock wait, not `SLEEP()`: MariaDB wakes a killed SLEEP through
 * one mutex all sleeping threads share, and a KILL that cannot take it retries for up to 2 s —
 * measured: KILL QUERY of SLEEPing listeners took up to 2,040 ms with one killer and 10,123 ms
 * with eight; of GET_LOCK-waiting ones at most 84 ms under 13,000 kills a second. A process sends
 * one ring at a time per listener (another hand-off meanwhile rings once more after it).
 *
 * No privilege is needed when both connections belong to the same user; where the ring cannot
 * work (another user without CONNECTION ADMIN, a proxy that multiplexes connections) waiters still
 * re-check every heartbeat: slower, never wrong. It reconnects by itself (an unref'd timer, 100 ms
 * doubling to 2 s); while it is down `id` is 0 and waiters queue without a listener. Its
 * connections never keep the process alive.
 */
/** The named lock a listener waits for (GET_LOCK names are server-wide, at most 64 characters; connection ids are unique while the server runs). */
const bell = (id: number): string => `ndl.bell.${id}`;

export class MySqlDoorbell {
  /** The listener's connection id (0: none now). */
  id = 0;
  private connection?: MySqlConnectionLike;
  /** Holds the bell lock the listener waits for. */
  private holder?: MySqlConnectionLike;
  /** Rings in flight, by listener id: true when another ring is due after it. */
  private readonly ringing = new Map<number, boolean>();
  private connecting?: Promise<void>;
  private retry?: NodeJS.Timeout;
  private backoffMs = 100;
  private closed = false;
  private purgedAt = 0;
  private ringRefused = false;

  constructor(
    private readonly pool: MySqlPoolLike,
    private readonly names: MySqlNames,
    /** One mail line: "<owner> <ms> <token>" or "!lost <owner>". */
    private readonly onMail: (body: string) => void,
    private readonly log: { warn(message: string): void },
  ) {}

  /** Connect, register and start listening (once; later calls share it). */
  start(): Promise<void> {
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /**
   * End the sleep of listener `id` (another process's, or ours: a hand-off to our own waiter is
   * read from the answer, so ours is never rung). Errors are dropped: the waiter's heartbeat is the
   * fallback. Sent on a pooled connection, after the grant committed.
   */
  ring(id: number, evenOurs = false): void {
    if (id === 0 || (id === this.id && !evenOurs) || this.closed) return;
    if (this.ringing.has(id)) return void this.ringing.set(id, true);
    this.ringing.set(id, false);
    this.pool
      .query(q('KILL QUERY ?', [id]))
      .catch((error: unknown) => {
        // ER_NO_SUCH_THREAD (1094): the listener is gone. ER_KILL_DENIED_ERROR (1095): another user.
        if (errnoOf(error) === 1095 && !this.ringRefused) {
          this.ringRefused = true;
          this.log.warn(
            'MySQL backend: KILL QUERY of another process\'s listener was refused (another database user without CONNECTION ADMIN): ' +
              'waiters of that process are served at their next heartbeat (500 ms) instead of at once',
          );
        }
      })
      .finally(() => {
        const again = this.ringing.get(id);
        this.ringing.delete(id);
        if (again) this.ring(id, evenOurs);
      });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.connecting?.catch(() => undefined);
    const { connection, holder, id } = this;
    this.connection = this.holder = undefined;
    this.id = 0;
    if (!connection) return;
    // Unregistered through the pool (the listener's own connection is waiting), then closed.
    await this.unregister(id);
    connection.destroy();
    holder?.destroy();
  }

  /** Its row in the listeners table goes (best effort: a row left behind is swept by the next listener to connect). */
  private unregister(id: number): Promise<unknown> {
    return this.pool.query(q(`DELETE FROM ${this.names.listeners} WHERE server_id = @@server_id AND conn_id = ?`, [id])).catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed || this.connection) return;
    const connection = await this.pool.getConnection();
    let holder: MySqlConnectionLike | undefined;
    try {
      holder = await this.pool.getConnection();
      for (const c of [connection, holder]) {
        c.connection?.stream?.unref?.();
        c.on('error', () => undefined);
      }
      if (this.closed) throw new Error('closed');
      // Both connections are ours for good: committed reads only (a mail line of a grant not yet
      // committed must never be told), autocommit, and no idle timeout for the bell's holder.
      for (const c of [connection, holder]) {
        await c.query(q('SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED'));
        await c.query(q('SET SESSION autocommit = 1, wait_timeout = 31536000'));
      }
      const [rows] = await connection.query(q('SELECT CONNECTION_ID() AS id'));
      const id = Number((rows as Array<{ id: unknown }>)[0].id);
      const [got] = await holder.query(q('SELECT GET_LOCK(?, 0) AS got', [bell(id)]));
      if (Number((got as Array<{ got: unknown }>)[0].got) !== 1) throw new Error(`the bell lock ${bell(id)} is taken`);
      await connection.query(q(`INSERT IGNORE INTO ${this.names.listeners} (server_id, conn_id) VALUES (@@server_id, ?)`, [id]));
      // Listeners whose bell nobody holds are gone (their process died, or lost its connections).
      await connection.query(q(`DELETE FROM ${this.names.listeners} WHERE server_id = @@server_id AND IS_USED_LOCK(CONCAT('ndl.bell.', conn_id)) IS NULL`));
      await this.purge(connection);
      this.connection = connection;
      this.holder = holder;
      this.id = id;
      this.backoffMs = 100;
    } catch (error) {
      connection.destroy();
      holder?.destroy();
      if (this.closed) return;
      throw error;
    }
    void this.listen(connection);
  }

  private async listen(connection: MySqlConnectionLike): Promise<void> {
    const { mail } = this.names;
    while (!this.closed && this.connection === connection) {
      try {
        const lines = allRows(await connection.query(q(`SELECT seq, body FROM ${mail} WHERE server_id = @@server_id AND listener = ? ORDER BY seq LIMIT 200`, [this.id])));
        if (lines.length > 0) {
          // Told first: a ring that interrupts the delete must not lose a line (told twice is harmless).
          for (const line of lines) this.onMail(text(line.body));
          // Exactly the lines read: a line with a lower seq may commit after this read (seq is
          // given at insert, not at commit), and must be read next time, not deleted unseen.
          await connection.query(q(`DELETE FROM ${mail} WHERE seq IN (?)`, [lines.map((line) => line.seq)]));
          continue;
        }
        if (Date.now() - this.purgedAt > MAIL_LIFE_S * 1000) await this.purge(connection);
        const [got] = await connection.query(
          q(`SELECT GET_LOCK(?, ${WAIT_S}) AS got FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM ${mail} WHERE server_id = @@server_id AND listener = ?)`, [bell(this.id), this.id]),
        );
        // The lock was free: its holder connection is gone. Start over with a new pair.
        if (Number((got as Array<{ got: unknown }>)[0]?.got) === 1) return this.lost(connection);
      } catch (error) {
        const errno = errnoOf(error);
        // Rung (or a server's statement time limit): read the mail.
        if (errno === ER.QUERY_INTERRUPTED || errno === ER.STATEMENT_TIMEOUT || errno === ER.QUERY_TIMEOUT) continue;
        return this.lost(connection);
      }
    }
  }

  /**
   * Once a minute (and at every connect): mail nobody read (its listener died), and rows of keys
   * nobody came back to — expired over a minute ago, nobody waiting — go, in batches. Best effort:
   * a procedure on such a key does the same in its own transaction.
   */
  private async purge(connection: MySqlConnectionLike): Promise<void> {
    this.purgedAt = Date.now();
    for (const statement of sweepStatements(this.names, MAIL_LIFE_S)) await connection.query(q(statement)).catch(() => undefined);
  }

  private lost(connection: MySqlConnectionLike): void {
    if (this.connection !== connection) return;
    this.connection = undefined;
    void this.unregister(this.id);
    this.id = 0;
    connection.destroy();
    this.holder?.destroy();
    this.holder = undefined;
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
