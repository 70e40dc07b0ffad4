import type { LockBackend } from '../../backends/lock-backend.interface.js';
import type { CheckContext } from './conformance-context.js';

/** One named promise of the backend contract, checked against instances the caller's factory made. */
export interface ConformanceCheck {
  /** The name the report uses (stable: users may filter on it). */
  readonly name: string;
  /** What it checks, in a sentence (docs/guide/testing.md lists them). */
  readonly about: string;
  /** Why it does not apply to `backend` (a capability it does not claim, a hook the caller did not give); undefined: it runs. */
  readonly skipUnless?: (backend: LockBackend, given: { unreachable: boolean }) => string | undefined;
  /** Throws (a CheckFailure, or any error) when the backend breaks the promise. */
  run(context: CheckContext): Promise<void>;
}
