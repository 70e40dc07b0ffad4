import type { LockBackend } from '../backends/lock-backend.interface.js';
import { LEASE_INTERNALS, type Lease } from './lease.js';
import { LeaseCore } from './lease-core.js';
import type { LeaseRegistry } from './lease-registry.js';
import type { LockEvents } from './lock-events.js';
import { kindOf, type LockRequest } from './lock-request.js';

/** Makes the lease handles: a grant's (registered, reported) and a reentrant one on a lease held already. */
export class LeaseGrants {
  readonly reportReleaseFailure = (lease: Lease, error: unknown): void => this.registry.releaseFailed(lease, error);

  constructor(
    private readonly registry: LeaseRegistry,
    private readonly events: LockEvents,
    private readonly driftFactor: number,
  ) {}

  /** `owner` was granted `o` on `backend`, trusted until `until` (monotonic). */
  grant(o: LockRequest, backend: LockBackend, owner: string, token: bigint | undefined, until: number, waitedMs: number): Lease {
    const core = new LeaseCore({
      key: o.key,
      keys: o.keys,
      purpose: o.purpose,
      token,
      backend,
      backendName: o.backend,
      permits: o.permits,
      mode: o.mode ?? 'write',
      kind: kindOf(o),
      owner,
      ttlMs: o.ttl,
      validUntilMs: until,
      driftFactor: this.driftFactor,
      policy: o.policy,
      observer: this.registry,
    });
    this.registry.add(core);
    if (this.events.listenerCount('acquired') > 0) {
      this.events.emit('acquired', { key: o.key, purpose: o.purpose, backend: o.backend, kind: core.kind, token, waitedMs, reentrant: false });
    }
    return LEASE_INTERNALS.create(core, true, this.reportReleaseFailure);
  }

  /** A reentrant handle on `outer` for the nested request `o`: releasing it leaves `outer` held. */
  reentrant(outer: Lease, o: LockRequest): Lease {
    const core = LEASE_INTERNALS.core(outer);
    this.events.emit('acquired', { key: o.key, purpose: o.purpose, backend: o.backend, kind: core.kind, token: outer.token, waitedMs: 0, reentrant: true });
    return LEASE_INTERNALS.create(core, false, this.reportReleaseFailure);
  }
}
