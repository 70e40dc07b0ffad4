import { MODULE_OPTIONS } from '../../common/checks.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { LockBackendUnavailableError } from '../../errors/lock-backend-unavailable.error.js';
import type { ResolvedZooKeeperOptions } from './zookeeper-backend.options.js';
import type { ZooKeeperClientLike } from './zookeeper-client.interface.js';
import { closeClient, containParseErrors } from './zookeeper-connection.js';

const CLIENT_PACKAGE: string = 'node-zookeeper-client';

type CreateClient = (connectionString: string, options: Record<string, unknown>) => ZooKeeperClientLike;

/**
 * A function that opens a new connected client of `forRoot({ zookeeper: { connectionString } })`
 * (node-zookeeper-client is loaded only here). The backend calls it at start and again after a
 * session is lost: an expired session's client cannot be revived.
 */
export async function zooKeeperConnector(o: ResolvedZooKeeperOptions, field: string): Promise<() => Promise<ZooKeeperClientLike>> {
  let createClient: CreateClient;
  try {
    // A specifier in a variable: the package ships no types, and only this backend needs it.
    const loaded = (await import(CLIENT_PACKAGE)) as unknown as { default?: { createClient: CreateClient }; createClient?: CreateClient };
    createClient = (loaded.createClient ?? loaded.default?.createClient)!;
    if (typeof createClient !== 'function') throw new Error('it has no createClient()');
  } catch (error) {
    throw new InvalidLockOptionsError(field, `needs the node-zookeeper-client package (npm install node-zookeeper-client): ${(error as Error).message}`, MODULE_OPTIONS);
  }
  // retries 0: a request is sent once; our own time-outs bound every call. spinDelay: how long the
  // client waits before trying the servers again after each has refused.
  return () => connected(createClient(o.connectionString!, { sessionTimeout: o.sessionTimeoutMs, spinDelay: 200, retries: 0 }), o.connectTimeoutMs, field);
}

/**
 * Connect `client` and resolve once it is connected, or close it and reject after `timeoutMs`.
 * Closed for good: a connection stuck in the handshake is destroyed at once (there is no session to end).
 */
export function connected(client: ZooKeeperClientLike, timeoutMs: number, name: string): Promise<ZooKeeperClientLike> {
  return new Promise((resolve, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      client.removeListener('connected', done);
      resolve(client);
    };
    const timer = setTimeout(() => {
      client.removeListener('connected', done);
      void closeClient(client, 0);
      reject(new LockBackendUnavailableError(name, 'connect', `not connected within ${timeoutMs} ms (connectTimeoutMs)`));
    }, timeoutMs);
    client.once('connected', done);
    containParseErrors(client);
    client.connect();
  });
}
