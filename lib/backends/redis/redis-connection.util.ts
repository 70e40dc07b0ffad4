import { errorText } from '../../common/redact.util.js';
import { withTimeout } from '../backend-call.util.js';
import type { RedisClientLike } from './redis-client.interface.js';

/** Let the process exit whatever this connection does (ioredis makes a new socket per reconnect). */
export function unref(client: RedisClientLike): void {
  const stream = (client as { stream?: { unref?(): void } }).stream;
  if (stream) stream.unref?.();
  else client.unref?.();
}

/** QUIT within a second, else drop the connection. */
export async function quit(client: RedisClientLike): Promise<void> {
  try {
    if (client.status === 'end') return;
    if (client.status !== 'ready') {
      client.disconnect();
      return;
    }
    await withTimeout(client.quit(), 1000, () => new Error('quit timed out'));
  } catch {
    client.disconnect();
  }
}

/**
 * Connection errors of the clients a backend owns go to its log once per outage (ioredis emits
 * one per reconnect attempt), and their recovery once: `ready` of the main client.
 */
export class RedisOutageLog {
  private down = false;

  constructor(
    private readonly name: string,
    private readonly log: { warn(message: string): void; log(message: string): void } | undefined,
    private readonly closed: () => boolean,
  ) {}

  watch(client: RedisClientLike, main: boolean): void {
    client.on('error', (error: unknown) => {
      if (this.down || this.closed()) return;
      this.down = true;
      this.log?.warn(
        `Redis connection of lock backend "${this.name}" failed: ${errorText(error)}; ` +
          'reconnecting (locks fail fast with LockBackendUnavailableError meanwhile; further errors of this outage are not logged)',
      );
    });
    if (main) {
      client.on('ready', () => {
        if (!this.down) return;
        this.down = false;
        this.log?.log(`Redis connection of lock backend "${this.name}" restored`);
      });
    }
  }
}
