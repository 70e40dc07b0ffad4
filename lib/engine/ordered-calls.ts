const noop = (): void => undefined;

/**
 * One lease's calls to its backend, one at a time: each is sent once the one before it has
 * answered (whatever the answer). Calls on pooled connections may land in any order: a claim
 * (ttl) landing after an extend (10 × ttl) would shorten the row under a holder that trusts the
 * extend — two holders.
 */
export class OrderedCalls {
  /** The call still unanswered, if any. */
  private last?: Promise<unknown>;

  send<T>(call: () => Promise<T>): Promise<T> {
    const previous = this.last;
    const sent = previous ? previous.then(call) : call();
    const settled: Promise<unknown> = sent.then(noop, noop);
    this.last = settled;
    void settled.then(() => {
      if (this.last === settled) this.last = undefined;
    });
    return sent;
  }
}
