import net from 'node:net';

/**
 * A loopback TCP proxy with one fault TcpProxy lacks: `resetOnNextAnswer()` lets requests through
 * and, at the next byte etcd sends back, destroys that connection instead of delivering it — the
 * request was applied, its answer is lost, and the client sees the connection drop (gRPC
 * UNAVAILABLE), as when a middlebox or a node resets a connection. New connections work as usual.
 */
export class ResettingProxy {
  private armed = false;
  private readonly sockets = new Set<net.Socket>();
  /** How many connections were reset by the fault. */
  resets = 0;

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
  ) {}

  static async start(targetPort: number, targetHost = '127.0.0.1'): Promise<ResettingProxy> {
    let proxy!: ResettingProxy;
    const server = net.createServer((client) => proxy.connect(client, targetPort, targetHost));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new ResettingProxy(server, (server.address() as net.AddressInfo).port);
    return proxy;
  }

  get endpoint(): string {
    return `127.0.0.1:${this.port}`;
  }

  resetOnNextAnswer(): void {
    this.armed = true;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private connect(client: net.Socket, port: number, host: string): void {
    const upstream = net.connect({ port, host });
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.on('data', (chunk: Buffer) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (this.armed) {
        this.armed = false;
        this.resets += 1;
        client.resetAndDestroy();
        upstream.destroy();
        return;
      }
      client.write(chunk);
    });
  }
}
