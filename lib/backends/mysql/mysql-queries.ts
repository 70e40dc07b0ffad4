import { errorText } from '../../common/redact.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { AnswerDeadlines } from '../answer-deadlines.js';
import { boundedCall, withTimeout } from '../backend-call.util.js';
import { ER, errnoOf, q, type MySqlPoolLike, type MySqlQueryResult } from './mysql-client.interface.js';
import type { MySqlDoorbell } from './mysql-doorbell.js';
import { createSchema } from './mysql-setup.js';
import type { MySqlNames } from './mysql-sql.util.js';

export interface MySqlQueriesConfig {
  readonly name: string;
  readonly pool: MySqlPoolLike;
  readonly names: MySqlNames;
  readonly doorbell: MySqlDoorbell;
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
  readonly closed: () => boolean;
  readonly log: { warn(message: string): void };
}

/** A deadlock rolls the procedure back whole: it is run again, at most this many times. */
const DEADLOCK_RETRIES = 3;

/**
 * Every statement of one MySQL backend: a bounded wait for setup (the schema, then the doorbell:
 * once) and a bounded time for the answer (one deadline timer for all). A deadlock the server
 * reports (it rolled the statement back) is run again.
 */
export class MySqlQueries {
  private readonly deadlines: AnswerDeadlines;
  private setup?: Promise<void>;
  private ready = false;

  constructor(private readonly config: MySqlQueriesConfig) {
    this.deadlines = new AnswerDeadlines(config.commandTimeoutMs);
  }

  /** Set up at bootstrap when the database answers; a configuration error fails here, naming the backend. */
  async start(): Promise<void> {
    const limitMs = 2 * (this.config.connectTimeoutMs + this.config.commandTimeoutMs);
    try {
      await withTimeout(this.ensureSetup(), limitMs, () => new Error(`no answer within ${limitMs} ms`));
    } catch (error) {
      if (error instanceof InvalidLockOptionsError) throw error;
    }
  }

  /**
   * One statement with a bounded wait for setup and a bounded time for the answer. An acquire whose
   * answer never came may still be applied: `cleanup` (an owner-checked release) runs at once, and
   * again if the answer comes late, so it cannot leave a ghost lock. A server error numbered
   * `tolerate` answers `[{ errno }, undefined]` instead of failing.
   */
  call(operation: string, key: string | undefined, sql: string, values: unknown[], cleanup?: () => void, tolerate?: number): Promise<MySqlQueryResult> {
    const { name, connectTimeoutMs, commandTimeoutMs, closed } = this.config;
    let sent: Promise<unknown> | undefined;
    return boundedCall({
      backend: name,
      operation,
      key,
      closed: closed(),
      connected: this.ready
        ? undefined
        : (unavailable) =>
            withTimeout(
              this.ensureSetup().catch((error: unknown) => {
                throw error instanceof InvalidLockOptionsError ? error : unavailable(`not ready: ${errorText(error)}`, error);
              }),
              connectTimeoutMs,
              () => unavailable(`not ready within ${connectTimeoutMs} ms (connectTimeoutMs)`),
            ),
      send: () => (sent = this.send(sql, values, tolerate)),
      timeoutMs: commandTimeoutMs,
      deadlines: this.deadlines,
      timedOut: () => `no answer within ${commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: () => {
        if (cleanup === undefined || closed()) return;
        cleanup();
        sent?.then(() => !closed() && cleanup(), () => undefined);
      },
    });
  }

  /** `SELECT 1` within `timeoutMs`, counting the wait for a connection. */
  async ping(timeoutMs: number): Promise<void> {
    await boundedCall({
      backend: this.config.name,
      operation: 'ping',
      closed: this.config.closed(),
      send: () => this.config.pool.query(q('SELECT 1')),
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms`,
    });
  }

  /** The answer; a server error numbered `tolerate` is an answer too: `[{ errno }, undefined]`. */
  private async send(sql: string, values: unknown[], tolerate?: number): Promise<MySqlQueryResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.config.pool.query(q(sql, values));
      } catch (error) {
        const errno = errnoOf(error);
        if (errno !== undefined && errno === tolerate) return [{ errno }, undefined];
        if (errno !== ER.DEADLOCK || attempt >= DEADLOCK_RETRIES || this.config.closed()) throw error;
      }
    }
  }

  /** The schema, then the doorbell: once; a failure (database down) is tried again at the next call. */
  private ensureSetup(): Promise<void> {
    this.setup ??= (async () => {
      await createSchema(this.config.pool, this.config.names, this.config.name, this.config.log);
      await this.config.doorbell.start();
    })().then(
      () => void (this.ready = true),
      (error: unknown) => {
        this.setup = undefined;
        throw error;
      },
    );
    return this.setup;
  }
}
