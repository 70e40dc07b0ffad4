/**
 * How long each master's acquire answers usually take (a moving average of every answer, late ones
 * included: an answer that came after a vote had given up on it still counts), and from it how long
 * a contended try waits for the masters still pending (see vote's `patienceMs`).
 */
export class MasterLatency {
  /** Per master, ms; undefined: no answer yet. */
  private readonly usualMs: Array<number | undefined>;

  constructor(
    count: number,
    private readonly nodeTimeoutMs: number,
  ) {
    this.usualMs = new Array(count).fill(undefined);
  }

  /** `answer` of master `i`, sent now: its time is counted once it comes. */
  timed<T>(i: number, answer: Promise<T>): Promise<T> {
    const sentAt = performance.now();
    answer.then(
      () => {
        const ms = performance.now() - sentAt;
        const before = this.usualMs[i];
        this.usualMs[i] = before === undefined ? ms : before * 0.8 + ms * 0.2;
      },
      () => undefined,
    );
    return answer;
  }

  /**
   * Four times the slowest usual answer time of the `pending` masters, at least 25 ms, at most the
   * per-master timeout. A stopped or unreachable master (its usual answers fast) costs a contended
   * try a few tens of ms, not its whole timeout; a master that is merely far away is still waited
   * for as long as it usually takes.
   */
  patienceMs(pending: readonly number[]): number {
    const usual = Math.max(0, ...pending.map((i) => this.usualMs[i] ?? 0));
    return Math.min(this.nodeTimeoutMs, Math.max(25, 4 * usual));
  }
}
