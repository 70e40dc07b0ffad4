import { failOption, isPlainObject } from '../../common/checks.util.js';
import type { LockBackendCapabilities } from '../lock-backend.interface.js';

/** One process only: never routed `correctness` locks unless `purposes.correctness` names it. */
export const MEMORY_CAPABILITIES: LockBackendCapabilities = { fencing: true, fairQueue: true, distributed: false, semaphore: true, readWrite: true };

/** The in-memory backend: one process only, monotonic tokens. For tests, never for production. */
export interface MemoryBackendOptions {
  /** Name under which it is registered. @default 'memory' */
  name?: string;
}

/** `forRoot({ memory: true | { name } })` checked; `false` leaves it off (undefined). */
export function resolveMemoryOptions(raw: unknown, field: string): { name: string } | undefined {
  if (raw === false) return undefined;
  if (raw !== true && !isPlainObject(raw)) failOption(field, 'must be true or { name? }');
  const name = raw === true ? field : (raw.name ?? field);
  if (typeof name !== 'string' || name === '') failOption(`${field}.name`, 'must be a non-empty string');
  return { name };
}
