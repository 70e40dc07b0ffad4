/**
 * A small seeded PRNG (mulberry32) and the helpers the schedule generator needs. Everything the
 * simulation decides — operations, their parameters, the fault schedule — comes from here, so a
 * seed replays the same plan. Timing (what the servers and the network make of it) does not.
 */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [min, max] (both inclusive). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** true with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  /** An item chosen with the given weights: `[[weight, item], …]`. */
  weighted<T>(choices: ReadonlyArray<readonly [number, T]>): T {
    const total = choices.reduce((sum, [w]) => sum + w, 0);
    let r = this.next() * total;
    for (const [w, item] of choices) {
      if ((r -= w) < 0) return item;
    }
    return choices[choices.length - 1][1];
  }

  /**
   * An independent stream derived from this seed and a label: adding an operation to one worker's
   * schedule does not shift another worker's or the fault schedule.
   */
  fork(label: string): Prng {
    let h = this.state ^ 0x9e3779b9;
    for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x85ebca6b) >>> 0;
    return new Prng((h ^ (h >>> 13)) >>> 0);
  }
}
