import { afterPendingIo } from '../answer-deadlines.js';

/** How the masters answered one request, as soon as the outcome is decided. */
export interface Tally<T> {
  /** Masters that said yes, by index. */
  readonly yes: number[];
  readonly no: number[];
  readonly failed: number[];
  /** Masters that had not answered when the outcome was decided. */
  readonly pending: number[];
  readonly answers: Array<T | undefined>;
  readonly errors: unknown[];
}

/**
 * Ask every master at once; settle as soon as the outcome is decided: a majority said yes, or
 * can no longer say yes because enough said no (`'answers'`: once a majority has answered at
 * all). Masters still pending go on in the background, each bounded by the per-node timeout.
 *
 * `patienceMs` (a `'yes'` vote): once a master has said no and a majority has answered without a
 * majority of yes, the masters still pending are waited for only that long (from who they are) — a
 * contended try that waited for a stopped master's whole timeout kept the masters it won from
 * the other callers all that time, and theirs lost too, round after round (split votes). The
 * outcome is then decided without them: not a majority.
 */
export function vote<T>(
  n: number,
  quorum: number,
  ask: (i: number) => Promise<T>,
  isYes: (answer: T) => boolean,
  until: 'yes' | 'answers' = 'yes',
  patienceMs?: (pending: number[]) => number,
): Promise<Tally<T>> {
  const yes: number[] = [];
  const no: number[] = [];
  const failed: number[] = [];
  const answers: Array<T | undefined> = new Array(n);
  const errors: unknown[] = [];
  return new Promise((resolve) => {
    let done = false;
    let patience: NodeJS.Timeout | undefined;
    const pendingNow = (): number[] => {
      const settled = new Set([...yes, ...no, ...failed]);
      return Array.from({ length: n }, (_, i) => i).filter((i) => !settled.has(i));
    };
    const settle = (outOfPatience = false): void => {
      const answered = yes.length + no.length;
      const pending = n - answered - failed.length;
      // No majority any more: "taken" (decided now) unless the masters still pending could yet
      // make it "too few masters answered" (those are waited for, each bounded).
      const noMajority = n - no.length - failed.length < quorum && failed.length + pending <= n - quorum;
      const decided = pending === 0 || (until === 'answers' ? answered >= quorum : yes.length >= quorum || noMajority || outOfPatience);
      if (done) return;
      if (!decided) {
        // Contended, a majority answered, and not a majority of yes: the masters still pending get
        // only so long. (With fewer answers they are waited for: failing, they make it "too few
        // masters answered" — LockBackendUnavailableError, not "busy".)
        if (patienceMs && until === 'yes' && no.length > 0 && answered >= quorum && patience === undefined) {
          // After the sockets are read (see afterPendingIo): an answer in by then still counts.
          patience = setTimeout(() => afterPendingIo(() => settle(true)), patienceMs(pendingNow()));
        }
        return;
      }
      done = true;
      clearTimeout(patience);
      resolve({ yes: [...yes], no: [...no], failed: [...failed], pending: pendingNow(), answers: [...answers], errors: [...errors] });
    };
    for (let i = 0; i < n; i++) {
      let asked: Promise<T>;
      try {
        asked = ask(i);
      } catch (error) {
        asked = Promise.reject(error);
      }
      asked.then(
        (answer) => {
          answers[i] = answer;
          (isYes(answer) ? yes : no).push(i);
          settle();
        },
        (error: unknown) => {
          failed.push(i);
          errors.push(error);
          settle();
        },
      );
    }
  });
}

/** The middle of the values, or undefined when there are none. */
export function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/**
 * The names at least `quorum` of the masters' `lists` hold (what inspect() finds held), at most
 * `max`. Each master cuts its list at `max` names of its own choosing (SCAN follows its own hash
 * order): when one may have been cut, names fewer masters listed fill the rest, most listed first
 * — the engine inspects every name, and a key a majority holds must not be missing from a list
 * shorter than `max` only because the masters cut theirs at different names.
 */
export function quorumNames(lists: readonly string[][], quorum: number, max: number): string[] {
  const counts = new Map<string, number>();
  for (const list of lists) for (const name of new Set(list)) counts.set(name, (counts.get(name) ?? 0) + 1);
  const byCount = [...counts].sort((a, b) => b[1] - a[1]);
  const cut = lists.some((list) => list.length >= max);
  return byCount.filter(([, n]) => cut || n >= quorum).slice(0, max).map(([name]) => name);
}
