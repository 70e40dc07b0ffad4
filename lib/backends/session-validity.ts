import { DeadlineTimer } from '../common/deadline-timer.js';
import { monotonicNow, validUntil } from '../common/validity.util.js';

/**
 * How long a server-side session — an etcd lease, a ZooKeeper session — is known to live, for a
 * backend whose keys ride on one. A request the server answered reached it after we sent it: the
 * session lives at least until that send time + its ttl, minus the drift allowance
 * (`validUntilMs`, monotonic). Armed (while the session carries something that must not outlive
 * it), `expired` is called the moment that bound passes unrenewed — a long pause, a cut link —
 * before the server's own expiry could let another holder in.
 */
export class SessionValidity {
  private until: number;
  /** The send time of the latest answered request. */
  private heardAt: number;
  private armed = false;
  private readonly expiry: DeadlineTimer;

  constructor(
    private ttl: number,
    private readonly driftFactor: number,
    /** When the request that proved the session alive (its grant, its connect) was sent. */
    sentAt: number,
    expired: () => void,
  ) {
    this.heardAt = sentAt;
    this.until = validUntil(sentAt, ttl, driftFactor);
    this.expiry = new DeadlineTimer(expired);
  }

  /** Monotonic time until which the server keeps the session at least. */
  get validUntilMs(): number {
    return this.until;
  }

  /** The session's ttl as the server last granted it. */
  get ttlMs(): number {
    return this.ttl;
  }

  /** A request sent at `sentAt` was answered; `ttlMs`: the ttl the server (re)granted with it. */
  heard(sentAt: number, ttlMs = this.ttl): void {
    this.heardAt = Math.max(this.heardAt, sentAt);
    this.until = Math.max(this.until, validUntil(sentAt, ttlMs, this.driftFactor));
    if (this.armed) this.expiry.set(this.until);
  }

  /**
   * The server now ends the session `ttlMs` after it last heard from us (a shorter timeout granted
   * at a reconnect): the bound shrinks at once, counted from the latest answered request.
   */
  shrink(ttlMs: number): void {
    if (!(ttlMs > 0) || ttlMs >= this.ttl) return;
    this.ttl = ttlMs;
    this.until = Math.min(this.until, validUntil(this.heardAt, ttlMs, this.driftFactor));
    if (this.armed) this.expiry.set(this.until);
  }

  /** A request answered now would move the bound by less than `ms`: one was answered lately. */
  freshWithin(ms: number): boolean {
    return validUntil(monotonicNow(), this.ttl, this.driftFactor) - this.until < ms;
  }

  /** Watch the bound: `expired` when it passes (at once, if it has). */
  arm(): void {
    this.armed = true;
    this.expiry.set(this.until);
  }

  disarm(): void {
    this.armed = false;
    this.expiry.clear();
  }
}

/**
 * A request every `everyMs` on an unref'd timer (never two at once, the next counted from the end
 * of the one before), until stopped: what keeps a session's validity bound fresh, or the session
 * itself alive.
 */
export class Heartbeat {
  private timer?: NodeJS.Timeout;
  /** Each start() begins a round of its own: a beat of a stopped round schedules nothing. */
  private round = 0;
  private running = false;

  constructor(
    private readonly everyMs: number,
    private readonly beat: () => Promise<void>,
  ) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    this.next(++this.round);
  }

  stop(): void {
    this.running = false;
    this.round++;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private next(round: number): void {
    if (round !== this.round) return;
    this.timer = setTimeout(() => {
      void this.beat()
        .catch(() => undefined)
        .then(() => this.next(round));
    }, this.everyMs);
    this.timer.unref();
  }
}
