import { BACKEND_PLUGINS } from '../../lib/backends/backend-registry.js';
import type { LockBackend } from '../../lib/backends/lock-backend.interface.js';
import type { DistributedLockModuleOptions } from '../../lib/index.js';
import { verifyLockBackend, type BackendConformanceReport } from '../../lib/testing/index.js';
import { backendCases, type BackendCase, type BackendServer } from '../harness/backend-servers.js';
import { freePort } from '../harness/servers.mjs';

// Every built-in backend, and each Redis client shape the module accepts, held to the one
// LockBackend contract by the public conformance suite (nest-distributed-lock/testing), against
// real servers. Each instance is built the way forRoot() builds it (through its plugin), as one
// process would; the instances of a case share its server.

const quiet = { warn: () => undefined, log: () => undefined };

/** A backend as forRoot({ [field]: raw }) builds it. */
async function built(field: keyof typeof BACKEND_PLUGINS, raw: unknown): Promise<LockBackend> {
  const plugin = BACKEND_PLUGINS[field] as { resolve(raw: unknown, field: string): unknown; create(settings: unknown, name: string, context: object): Promise<LockBackend> };
  return plugin.create(plugin.resolve(raw, field), field, { driftFactor: 0.01, log: quiet });
}

/** A port reserved for this process and never listened on. */
const closedPort = freePort;

/** A backend as forRoot() builds it from these options: through its plugin, or the instance passed in `backends`. */
async function instance(options: DistributedLockModuleOptions): Promise<LockBackend> {
  if (options.backends) return Object.values(options.backends)[0] as LockBackend;
  const field = (Object.keys(BACKEND_PLUGINS) as Array<keyof typeof BACKEND_PLUGINS>).find((name) => options[name as keyof DistributedLockModuleOptions] !== undefined);
  if (!field) throw new Error(`no backend in ${Object.keys(options).join(', ')}`);
  return built(field, options[field as keyof DistributedLockModuleOptions]);
}

/** The checks a case is not held to: those of the capabilities it does not claim. */
const skipsOf = (c: BackendCase): string[] => [
  ...(c.fencing ? [] : ['tokens-increase']),
  ...(c.fifo ? [] : ['waiters-served-in-order']),
  ...(c.semaphores ? [] : ['semaphore-admits-at-most-permits', 'semaphore-permits-agree']),
  ...(c.readWrite ? [] : ['rw-readers-share-writer-alone', 'rw-no-writer-starvation', 'rw-upgrade-without-window']),
  ...(c.atomicMultiKey ? [] : ['acquire-all-all-or-nothing']),
  // No server to be cut off from.
  ...(c.inProcess ? ['unreachable-bounded'] : []),
];

// Every backend and topology (each Redis client shape is a case of its own).
const CASES = backendCases(() => true, { clients: true });

describe.each(CASES)('conformance: $name', (c) => {
  let server: BackendServer;
  let report: BackendConformanceReport;
  beforeAll(async () => {
    server = await c.server();
    report = await verifyLockBackend({
      // Each instance as one more process on the server (a client of its own where the options carry one).
      create: async () => instance((await server.another?.()) ?? server.options),
      unreachable: server.unreachable ? async () => instance(await server.unreachable!(closedPort)) : undefined,
    });
  }, 240_000);
  afterAll(async () => {
    await server?.stop();
  }, 60_000);

  it('passes every check of every capability it claims', () => {
    expect(report.failed).toEqual([]);
    expect(report.passed).toEqual(expect.arrayContaining(['exclusion', 'owner-checked-release', 'stale-owner-cannot-touch-next-holder', 'waiter-granted-after-release', 'nothing-left-behind', 'close']));
  });

  it('skips exactly the checks of capabilities it does not claim', () => {
    expect([...report.skipped].sort()).toEqual(skipsOf(c).sort());
  });
});
