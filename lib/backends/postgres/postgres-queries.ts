import { errorText } from '../../common/redact.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { AnswerDeadlines } from '../answer-deadlines.js';
import { boundedCall, withTimeout } from '../backend-call.util.js';
import type { PgPoolLike, PgQueryConfigLike } from './postgres-client.interface.js';
import { NotifyUnreachableError, type PostgresListener } from './postgres-listener.js';
import { createSchema } from './postgres-statements.js';

export interface PostgresQueriesConfig {
  readonly name: string;
  readonly pool: PgPoolLike;
  /** The schema's tables and functions, created if absent. */
  readonly setupStatements: string[];
  readonly listener: PostgresListener;
  readonly connectTimeoutMs: number;
  readonly commandTimeoutMs: number;
  readonly closed: () => boolean;
}

/**
 * Every statement of one PostgreSQL backend: a bounded wait for setup (the schema, then the LISTEN
 * session: once) and connection, and a bounded time for the answer (one deadline timer for all).
 */
export class PostgresQueries {
  private readonly deadlines: AnswerDeadlines;
  private setup?: Promise<void>;
  /** The schema exists and LISTEN was started once: calls no longer wait for setup. */
  private ready = false;

  constructor(private readonly config: PostgresQueriesConfig) {
    this.deadlines = new AnswerDeadlines(config.commandTimeoutMs);
  }

  /**
   * Set up at bootstrap when the database answers. A pooler that cannot carry LISTEN fails here,
   * naming the backend; a database that does not answer yet is tried again at the first call.
   */
  async start(): Promise<void> {
    // Connect and create the schema, then the LISTEN probe (bounded by connect + command time itself).
    const limitMs = 2 * (this.config.connectTimeoutMs + this.config.commandTimeoutMs);
    try {
      await withTimeout(this.ensureSetup(), limitMs, () => new Error(`no answer within ${limitMs} ms`));
    } catch (error) {
      if (error instanceof InvalidLockOptionsError) throw error;
    }
  }

  /**
   * One function call with a bounded wait for setup and connection and a bounded time for the
   * answer. An acquire whose answer never came may still be applied: `cleanup` (an owner-checked
   * release) runs at once, and again if the answer comes late — a release sent on another
   * connection may have run before the acquire did — so it cannot leave a ghost lock.
   */
  async call(operation: string, key: string, statement: PgQueryConfigLike, values: unknown[], cleanup?: () => void): Promise<Record<string, any>> {
    return (await this.rows(operation, key, statement, values, cleanup))[0] ?? {};
  }

  /** call(), answering every row. */
  async rows(operation: string, key: string, statement: PgQueryConfigLike, values: unknown[], cleanup?: () => void): Promise<Record<string, any>[]> {
    const { name, pool, connectTimeoutMs, commandTimeoutMs, closed } = this.config;
    let sent: Promise<unknown> | undefined;
    const result = await boundedCall({
      backend: name,
      operation,
      key,
      closed: closed(),
      connected: this.ready ? undefined : (unavailable) =>
        withTimeout(
          this.ensureSetup().catch((error: unknown) => {
            throw error instanceof InvalidLockOptionsError ? error : unavailable(`not ready: ${errorText(error)}`, error);
          }),
          connectTimeoutMs,
          () => unavailable(`not ready within ${connectTimeoutMs} ms (connectTimeoutMs)`),
        ),
      send: () => (sent = pool.query({ ...statement, values })),
      timeoutMs: commandTimeoutMs,
      deadlines: this.deadlines,
      timedOut: () => `no answer within ${commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: () => {
        if (cleanup === undefined || closed()) return;
        cleanup();
        sent?.then(() => !closed() && cleanup(), () => undefined);
      },
    });
    return result.rows;
  }

  /** `SELECT 1` within `timeoutMs`, counting the wait for a connection. */
  async ping(timeoutMs: number): Promise<void> {
    await boundedCall({
      backend: this.config.name,
      operation: 'ping',
      closed: this.config.closed(),
      send: () => this.config.pool.query('SELECT 1'),
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms`,
    });
  }

  /** The schema, then the LISTEN session: once; a failure (database down) is retried next time. */
  private ensureSetup(): Promise<void> {
    const { name, pool, setupStatements, listener } = this.config;
    this.setup ??= (async () => {
      await createSchema(pool, setupStatements);
      try {
        await listener.start();
      } catch (error) {
        if (error instanceof NotifyUnreachableError) throw new InvalidLockOptionsError(name, error.message, 'DistributedLockModule options');
        throw error;
      }
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
