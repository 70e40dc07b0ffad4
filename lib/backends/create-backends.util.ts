import { Logger } from '@nestjs/common';
import { LOGGER_CONTEXT } from '../distributed-lock.constants.js';
import type { ConfiguredBackend } from './backend-plugin.interface.js';
import type { LockBackend } from './lock-backend.interface.js';

/**
 * Build every configured backend: the built-in ones through their plugins, then the application's
 * own. A built-in backend owns (closes) only a client it opened itself.
 */
export async function createBackends(options: {
  readonly builtIn: readonly ConfiguredBackend[];
  readonly backends: Readonly<Record<string, LockBackend>>;
  readonly driftFactor: number;
}): Promise<Map<string, LockBackend>> {
  const context = { driftFactor: options.driftFactor, log: new Logger(LOGGER_CONTEXT) };
  const backends = new Map<string, LockBackend>();
  for (const { name, plugin, settings } of options.builtIn) backends.set(name, await plugin.create(settings, name, context));
  for (const [name, backend] of Object.entries(options.backends)) backends.set(name, backend);
  return backends;
}
