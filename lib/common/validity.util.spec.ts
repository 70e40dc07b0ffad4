import { driftAllowanceMs, validUntil } from './validity.util.js';

describe('lease validity', () => {
  it('deducts 1 % of the ttl plus 2 ms for drift, from the time the request was sent', () => {
    expect(driftAllowanceMs(10_000, 0.01)).toBe(102);
    expect(validUntil(1_000, 10_000, 0.01)).toBe(1_000 + 10_000 - 102);
  });

  it('never grants more than the ttl, even with no drift factor', () => {
    expect(validUntil(0, 50, 0)).toBe(48);
  });
});
