/**
 * Run `expire` once what has already reached this process's sockets has been read. A timer that
 * comes due while the event loop was blocked (a long garbage collection, a synchronous parse) runs
 * before the loop polls its sockets, so an answer that arrived in time, and waits in a socket
 * buffer, would be timed out unread. `setImmediate` runs after the loop's next poll: that answer
 * settles first, and a time-out that really happened is late by one turn of the loop.
 */
export function afterPendingIo(expire: () => void): void {
  setImmediate(expire);
}

/** What a call's failures become: the time-out's error, and any failure as the caller sees it. */
export interface CallFailures {
  timedOut(): Error;
  failed(error: unknown): unknown;
}

interface Pending {
  readonly due: number;
  settled: boolean;
  readonly reject: (reason: unknown) => void;
  readonly failures: CallFailures;
}

/**
 * The answer deadlines of one backend's calls on one timer, not one timer per call: a timer set
 * and cleared per command cost ~3.5 µs of client CPU per Redis command here (Node re-creates the
 * timer list of a duration each time it empties). Every deadline is now + the same time, so they
 * come due in the order they were set: a queue, whose oldest unsettled entry the timer waits for.
 *
 * Like a timer per call, the timer keeps the process alive while any call is unanswered, and
 * only then.
 */
export class AnswerDeadlines {
  private readonly queue: Pending[] = [];
  private head = 0;
  private unsettled = 0;
  private timer?: NodeJS.Timeout;

  constructor(readonly ms: number) {}

  /** Calls sent and not yet answered (nor timed out). */
  get inFlight(): number {
    return this.unsettled;
  }

  /**
   * Settle as `answer` does, or reject with `timedOut()` if it has not settled within `ms`.
   * `failed` maps an answer's rejection (and the time-out's error) to what the caller sees.
   */
  bound<T>(answer: Promise<T>, timedOut: () => Error, failed: (error: unknown) => unknown): Promise<T> {
    return this.boundWith(answer, { timedOut, failed });
  }

  /** As bound(), with both mappings on one object (a call's own state: no closures per call). */
  boundWith<T>(answer: Promise<T>, failures: CallFailures): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = { due: performance.now() + this.ms, settled: false, reject, failures };
      this.queue.push(entry);
      this.unsettled += 1;
      if (!this.timer) this.arm(this.ms);
      else if (this.unsettled === 1) this.timer.ref();
      answer.then(
        (value) => {
          if (this.settle(entry)) resolve(value);
        },
        (error: unknown) => {
          if (this.settle(entry)) reject(failures.failed(error));
        },
      );
    });
  }

  /** Mark `entry` answered: false if it had timed out already. */
  private settle(entry: Pending): boolean {
    if (entry.settled) return false;
    entry.settled = true;
    this.unsettled -= 1;
    this.dropSettled();
    // Nothing in flight: the timer stays set (the next call needs no new one) but holds nothing.
    if (this.unsettled === 0) this.timer?.unref();
    return true;
  }

  private dropSettled(): void {
    while (this.head < this.queue.length && this.queue[this.head].settled) this.head += 1;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  private arm(inMs: number): void {
    this.timer = setTimeout(() => this.fire(), Math.max(1, Math.ceil(inMs)));
    if (this.unsettled === 0) this.timer.unref();
  }

  /** The oldest deadline is due: expire what is still unanswered once pending answers are read (afterPendingIo). */
  private fire(): void {
    afterPendingIo(() => this.expireDue());
  }

  private expireDue(): void {
    this.timer = undefined;
    const now = performance.now();
    this.dropSettled();
    while (this.head < this.queue.length && this.queue[this.head].due <= now) {
      const entry = this.queue[this.head];
      entry.settled = true;
      this.unsettled -= 1;
      entry.reject(entry.failures.failed(entry.failures.timedOut()));
      this.dropSettled();
    }
    if (this.head < this.queue.length) this.arm(this.queue[this.head].due - now);
  }
}
