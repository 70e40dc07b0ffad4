import type { BackendPlugin } from '../backend-plugin.interface.js';
import { MEMORY_CAPABILITIES, resolveMemoryOptions, type MemoryBackendOptions } from './memory-backend.options.js';
import { MemoryBackend } from './memory.backend.js';

/** `forRoot({ memory: true | { name } })`: registered under the name it is given. */
export const memoryPlugin: BackendPlugin<boolean | MemoryBackendOptions, { name: string }> = {
  capabilities: MEMORY_CAPABILITIES,
  resolve: resolveMemoryOptions,
  chosenName: ({ name }, field) => ({ name, field: `${field}.name` }),
  create: async (_settings, name) => new MemoryBackend(name),
};
