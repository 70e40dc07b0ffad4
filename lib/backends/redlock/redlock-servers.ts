import { withTimeout } from '../backend-call.util.js';
import type { RedisClientLike } from '../redis/redis-client.interface.js';

/**
 * Two masters that are one server under two names (a DNS alias, a proxy, another database) would
 * give it two votes: the options catch what the addresses show, this the rest. Each connection's
 * server is its `run_id` (INFO server, read on every 'ready'); a later master on an earlier one's
 * server has no vote while that lasts, and `sameServer` is told once per pairing. (Before the
 * first answer, one server with one key prefix and database still votes once: its second SET NX
 * finds the first's key.)
 */
export class RedlockServers {
  /** Per master, the `run_id` of the server its connection reached last. */
  private readonly runIds: Array<string | undefined>;
  /** Later master → the earlier one on the same server. */
  private same = new Map<number, number>();
  private readonly unwatch: Array<() => void> = [];

  constructor(
    clients: readonly RedisClientLike[],
    private readonly timeoutMs: number,
    private readonly sameServer: (earlier: number, later: number, runId: string) => void,
  ) {
    this.runIds = new Array(clients.length);
    clients.forEach((client, i) => {
      const identify = (): void => this.identify(client, i);
      client.on('ready', identify);
      const off = (client as { off?: (event: string, listener: () => void) => unknown }).off;
      if (off) this.unwatch.push(() => void off.call(client, 'ready', identify));
      if (client.status === 'ready') identify();
    });
  }

  /** The earlier master whose server master `i` reaches too, if any. */
  sameAs(i: number): number | undefined {
    return this.same.get(i);
  }

  close(): void {
    for (const unwatch of this.unwatch.splice(0)) unwatch();
  }

  private identify(client: RedisClientLike, i: number): void {
    const info = (client as { info?: (section: string) => Promise<unknown> }).info;
    if (typeof info !== 'function') return;
    void withTimeout(info.call(client, 'server'), this.timeoutMs, () => new Error('INFO timed out')).then(
      (reply) => {
        this.runIds[i] = /(?:^|\r?\n)run_id:(\w+)/.exec(String(reply))?.[1];
        this.compare();
      },
      () => undefined, // unknown until its next connection; a master that does not answer has no vote anyway
    );
  }

  private compare(): void {
    const first = new Map<string, number>();
    const same = new Map<number, number>();
    this.runIds.forEach((id, i) => {
      if (id === undefined) return;
      const earlier = first.get(id);
      if (earlier === undefined) first.set(id, i);
      else same.set(i, earlier);
    });
    for (const [later, earlier] of same) if (this.same.get(later) !== earlier) this.sameServer(earlier, later, this.runIds[later]!);
    this.same = same;
  }
}
