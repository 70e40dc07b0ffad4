import { AnswerDeadlines } from '../answer-deadlines.js';
import { boundedCall } from '../backend-call.util.js';
import type { EtcdClientLike } from './etcd-client.interface.js';
import { grpcDeadline, isLeaseNotFound } from './etcd-requests.util.js';
import type { EtcdSession } from './etcd-session.js';

export interface EtcdCallsConfig {
  readonly name: string;
  readonly client: EtcdClientLike;
  /** The key a ping reads (never written). */
  readonly healthKey: string;
  readonly commandTimeoutMs: number;
  readonly closed: () => boolean;
  /** Whether a request's stream may keep the process alive (after bootstrap). */
  readonly holdsProcess: () => boolean;
  /** Delete `myKey` a few times over the next seconds (a put of unknown outcome). */
  readonly cleanUp: (myKey: string) => void;
  /** The server says the session lease does not exist. */
  readonly lose: (session: EtcdSession, detail: string) => void;
  /** A write on the session had an unknown outcome: no new key goes on it, revoked once unused. */
  readonly retire: (session: EtcdSession) => void;
}

/** Every request of one etcd backend: bounded by commandTimeoutMs (one deadline timer for all), with gRPC deadlines. */
export class EtcdCalls {
  private readonly deadlines: AnswerDeadlines;

  constructor(private readonly config: EtcdCallsConfig) {
    this.deadlines = new AnswerDeadlines(config.commandTimeoutMs);
  }

  /**
   * One request, bounded by commandTimeoutMs. A write whose answer never came may still be
   * applied later; `cleanupKey` is then deleted a few times over the next seconds (the deletes
   * follow the write on the same connection), and `session`, the lease it rides on, is retired —
   * revoked once unused — so a late put cannot leave a key that blocks the queue while our process
   * lives. An answer saying the session lease does not exist means the session is lost.
   */
  call<T>(operation: string, key: string, send: () => Promise<T>, cleanupKey?: string | readonly string[], session?: EtcdSession): Promise<T> {
    const { name, commandTimeoutMs } = this.config;
    return boundedCall({
      backend: name,
      operation,
      key,
      closed: this.config.closed(),
      send,
      timeoutMs: commandTimeoutMs,
      deadlines: this.deadlines,
      timedOut: () => `no answer within ${commandTimeoutMs} ms (commandTimeoutMs)`,
      onFailure: (error) => {
        if (session && isLeaseNotFound(error)) {
          // A definite answer: nothing was written, and every key on the lease is gone.
          this.config.lose(session, `the session lease ${session.id} no longer exists on the server (revoked or expired)`);
          return;
        }
        if (cleanupKey !== undefined) for (const k of typeof cleanupKey === 'string' ? [cleanupKey] : cleanupKey) this.config.cleanUp(k);
        if (session) this.config.retire(session);
      },
    });
  }

  /** gRPC call options of a request: its deadline. */
  deadline(): { deadline: Date } {
    return grpcDeadline(this.config.commandTimeoutMs, this.config.holdsProcess());
  }

  /** A linearizable read (it needs a leader and a quorum, unlike a member's status) within `timeoutMs`. */
  async ping(timeoutMs: number): Promise<void> {
    await boundedCall({
      backend: this.config.name,
      operation: 'ping',
      closed: this.config.closed(),
      send: () => this.config.client.kv.range({ key: Buffer.from(this.config.healthKey), keys_only: true }, { deadline: new Date(Date.now() + timeoutMs) }),
      timeoutMs,
      timedOut: () => `no answer within ${timeoutMs} ms`,
    });
  }
}
