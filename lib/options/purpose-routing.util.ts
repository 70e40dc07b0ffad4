import { BACKEND_PLUGINS } from '../backends/backend-registry.js';
import type { LockBackendCapabilities } from '../backends/lock-backend.interface.js';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';

type Capabilities = Readonly<Record<string, LockBackendCapabilities>>;

/** What a backend must declare to be routed a purpose by default. */
const SERVES_BY_DEFAULT: Record<LockPurpose, (c: LockBackendCapabilities) => boolean> = {
  efficiency: (c) => c.distributed,
  // Only a backend that is both fencing and distributed: the in-memory one would let every replica
  // "hold" the same key (each with token 1). A test setup that wants it says so:
  // purposes: { correctness: 'memory' }.
  correctness: (c) => c.fencing && c.distributed,
};

/**
 * Refuses (never falls back): a `correctness` lock on a backend without fencing tokens. The module
 * options name the purpose in the field (`purposes.correctness`), a lock's options in the message.
 */
export function checkCanServe(purpose: LockPurpose, name: string, capabilities: Capabilities, field: string, where: string): void {
  if (purpose === 'correctness' && !capabilities[name].fencing) {
    const what = field === 'backend' ? `'${purpose}'` : purpose;
    throw new InvalidLockOptionsError(field, `backend "${name}" issues no fencing tokens, so it cannot serve ${what} locks`, where);
  }
}

/**
 * The backend of each purpose the options leave unrouted: the first configured backend, in
 * registration order (the backend registry's order, then the application's backends), that
 * serves it by default — efficiency: Redis, else the first distributed backend (else the first
 * there is); correctness: the first fencing, distributed one (etcd first). A purpose nothing can
 * serve stays unrouted, and a lock asking for it is refused (`routeBackend`).
 */
export function routeByDefault(routed: Partial<Record<LockPurpose, string>>, capabilities: Capabilities): Partial<Record<LockPurpose, string>> {
  const names = Object.keys(capabilities);
  const purposes = { ...routed };
  purposes.efficiency ??= names.find((n) => SERVES_BY_DEFAULT.efficiency(capabilities[n])) ?? names[0];
  const correctness = purposes.correctness ?? names.find((n) => SERVES_BY_DEFAULT.correctness(capabilities[n]));
  if (correctness !== undefined) purposes.correctness = correctness;
  return purposes;
}

/** The built-in backends that could serve `purpose` by default, for "configure …" advice. */
function builtInsServing(purpose: LockPurpose): string {
  return Object.entries(BACKEND_PLUGINS)
    .filter(([, plugin]) => SERVES_BY_DEFAULT[purpose](plugin.capabilities))
    .map(([field]) => field)
    .join(' or ');
}

/**
 * The backend a lock with this purpose uses. Refuses — never falls back — when the purpose is
 * `correctness` and the backend issues no fencing tokens.
 */
export function routeBackend(
  purpose: LockPurpose,
  explicit: unknown,
  module: { capabilities: Capabilities; purposes: Partial<Record<LockPurpose, string>> },
  where: string,
): string {
  const configured = Object.keys(module.capabilities);
  if (explicit !== undefined && (typeof explicit !== 'string' || !Object.hasOwn(module.capabilities, explicit))) {
    throw new InvalidLockOptionsError('backend', `unknown backend ${JSON.stringify(explicit)} (configured: ${configured.join(', ')})`, where);
  }
  const name = (explicit as string | undefined) ?? module.purposes[purpose];
  if (name === undefined) {
    const local = configured.filter((n) => module.capabilities[n].fencing && !module.capabilities[n].distributed);
    throw new InvalidLockOptionsError(
      'purpose',
      local.length > 0
        ? `no configured backend can serve '${purpose}' locks: they need a distributed backend with fencing tokens; ` +
            `${local.join(', ')} lives in one process only, so it serves them only when purposes.correctness names it ` +
            `(for tests); configure ${builtInsServing(purpose)}`
        : `no configured backend can serve '${purpose}' locks: they need fencing tokens, which ${configured.join(', ')} do not issue; configure ${builtInsServing(purpose)}`,
      where,
    );
  }
  checkCanServe(purpose, name, module.capabilities, 'backend', where);
  return name;
}
