/** How a granted lease lives (see `LeaseLifetimeOptions`), after validation. */
export interface LeasePolicy {
  /** Watchdog renewal, capped at `maxHold` ms of total hold time (Infinity: a leader's); undefined when off. */
  watchdog?: { maxHold: number };
  lockAtLeastFor: number;
  lockDelay: number;
  rejectOnLoss: boolean;
}
