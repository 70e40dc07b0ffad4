import net from 'node:net';

export type ProxyMode = { kind: 'pass' } | { kind: 'delay'; ms: number } | { kind: 'blackhole' } | { kind: 'drop' };

/**
 * A TCP proxy on loopback between one client and one server, for real network faults:
 * - delay: every chunk, both ways, arrives `ms` later (order kept);
 * - blackhole: nothing gets through, but it is kept, as TCP would retransmit it;
 * - drop: nothing gets through, and it is lost (a server that accepts a connection and never reads it);
 * - heal: back to pass, and what the blackhole held is delivered — late. A write the client gave
 *   up on still reaches the server: the stale write fencing must refuse.
 */
export class TcpProxy {
  private mode: ProxyMode = { kind: 'pass' };
  private readonly held: Array<() => void> = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly clients = new Set<net.Socket>();

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
    let proxy!: TcpProxy;
    const server = net.createServer((client) => proxy.connect(client, targetPort, targetHost));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new TcpProxy(server, (server.address() as net.AddressInfo).port);
    return proxy;
  }

  get endpoint(): string {
    return `127.0.0.1:${this.port}`;
  }

  delay(ms: number): void {
    this.mode = { kind: 'delay', ms };
  }

  blackhole(): void {
    this.mode = { kind: 'blackhole' };
  }

  drop(): void {
    this.mode = { kind: 'drop' };
  }

  heal(): void {
    this.mode = { kind: 'pass' };
    for (const deliver of this.held.splice(0)) deliver();
  }

  /** Client connections open now (a client that closed its end is gone from here). */
  get openConnections(): number {
    return this.clients.size;
  }

  /** Reset every connection open now (a server that died): clients must reconnect. */
  cut(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private connect(client: net.Socket, port: number, host: string): void {
    const upstream = net.connect({ port, host });
    this.clients.add(client);
    client.on('close', () => this.clients.delete(client));
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    this.pipe(client, upstream);
    this.pipe(upstream, client);
  }

  /** Forward in order: a chunk never overtakes an earlier one, whatever the mode was when it came. */
  private pipe(from: net.Socket, to: net.Socket): void {
    let last: Promise<void> = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      const mode = this.mode;
      if (mode.kind === 'drop') return;
      const gate =
        mode.kind === 'delay'
          ? new Promise<void>((resolve) => setTimeout(resolve, mode.ms))
          : mode.kind === 'blackhole'
            ? new Promise<void>((resolve) => this.held.push(resolve))
            : Promise.resolve();
      last = Promise.all([last, gate]).then(() => {
        if (!to.destroyed) to.write(chunk);
      });
    });
  }
}
