import net from 'node:net';
import { Injectable, Module, type CanActivate, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { DistributedLockModule, DistributedLockService, MemoryBackend } from '../../lib/index.js';
import { DistributedLockBoardModule, type BoardView, type DistributedLockBoardOptions } from '../../lib/board/index.js';

// Adversarial review of the lock board's HTTP side.

/** A cookie-session guard, as an application with a browser front end has: the cookie rides along cross-site too. */
@Injectable()
class CookieGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    if (!String(request.headers.cookie ?? '').includes('session=ops')) return false;
    request.user = { id: 'ops' };
    return true;
  }
}

const ADAPTERS = [
  ['Express', () => new ExpressAdapter()],
  ['Fastify', () => new FastifyAdapter()],
] as const;

async function boardApp(
  adapter: () => ExpressAdapter | FastifyAdapter,
  board: DistributedLockBoardOptions,
  setup: (app: INestApplication) => void = () => undefined,
  created: (app: INestApplication) => void = () => undefined,
): Promise<{ app: INestApplication; port: number; url: string; locks: DistributedLockService }> {
  @Module({ imports: [DistributedLockModule.forRoot({ backends: { shared: new MemoryBackend('shared') } }), DistributedLockBoardModule.forRoot(board)] })
  class AppModule {}
  const app = await NestFactory.create(AppModule, adapter(), { logger: false, abortOnError: false });
  created(app);
  setup(app);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return { app, port: Number(new URL(url).port), url, locks: app.get(DistributedLockService) };
}

/** One raw HTTP/1.1 request (any request target, as a client other than a browser may send it). */
function rawRequest(port: number, requestLine: string, headers: Record<string, string>, body = ''): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => (data += chunk));
    socket.on('error', reject);
    socket.setTimeout(3_000, () => socket.destroy());
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(data)?.[1] ?? 0), body: data.slice(data.indexOf('\r\n\r\n') + 4) }));
    socket.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(data)?.[1] ?? 0), body: data.slice(data.indexOf('\r\n\r\n') + 4) }));
    const head = Object.entries({ ...headers, Connection: 'close' }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    socket.write(`${requestLine}\r\n${head}${body ? `Content-Length: ${Buffer.byteLength(body)}\r\n` : ''}\r\n${body}`);
  });
}

describe.each(ADAPTERS)('the lock board over HTTP (%s)', (name, adapter) => {
  const apps: INestApplication[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close().catch(() => undefined);
  });
  const start = async (board: DistributedLockBoardOptions, setup?: (app: INestApplication) => void) => {
    return boardApp(adapter, board, setup, (app) => apps.push(app));
  };

  it('the page addresses its script, stylesheet and API on its own origin, whatever request target reached it', async () => {
    const { port } = await start({ public: true });
    // An absolute-form request target (RFC 9112 §3.2.2): Node accepts it, Express routes it by its
    // path (/locks), and the board builds its asset and API URLs from request.originalUrl.
    const answer = await rawRequest(port, 'GET http://evil.example/locks HTTP/1.1', { Host: `127.0.0.1:${port}` });
    if (answer.status !== 200) return; // this adapter does not route it at all: nothing reflected
    const srcs = [...answer.body.matchAll(/(?:src|href|data-api)="([^"]*)"/g)].map((m) => m[1]);
    expect(srcs.length).toBeGreaterThan(0);
    for (const src of srcs) expect(src).toMatch(/^\/(?!\/)/);
  });

  it('with CORS enabled by the application (credentials), a cross-origin page cannot read the held keys', async () => {
    const { url, locks } = await start({ guard: CookieGuard, readOnly: false }, (app) => app.enableCors({ origin: true, credentials: true }));
    const lease = await locks.acquire('secret-customer-42', { purpose: 'efficiency', backend: 'shared', ttl: 20_000 });
    // What Chrome sends for fetch(url, { credentials: 'include' }) from https://evil.example.
    const read = await fetch(`${url}/locks/api/locks`, {
      headers: { cookie: 'session=ops', origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors' },
    });
    const readable = read.status === 200 && read.headers.get('access-control-allow-origin') === 'https://evil.example';
    const body = readable ? ((await read.json()) as BoardView) : undefined;
    await lease.release();
    // Expected: refused like the POST (Sec-Fetch-Site: cross-site), so the evil page reads nothing.
    expect({ readable, keys: body?.backends.flatMap((b) => b.locks.map((l) => l.key)) }).toEqual({ readable: false, keys: undefined });
  });

  it('with CORS enabled by the application, a cross-origin POST from a browser without Sec-Fetch-* (Safari < 16.4) cannot force-release', async () => {
    const { url, locks } = await start({ guard: CookieGuard, readOnly: false }, (app) => app.enableCors({ origin: true, credentials: true }));
    const lease = await locks.acquire('job:nightly', { purpose: 'efficiency', backend: 'shared', ttl: 20_000 });
    // The preflight the README says is "never answered":
    const preflight = await fetch(`${url}/locks/api/locks/force-release`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    // The request itself: Origin names another site; no Sec-Fetch-Site header.
    const post = await fetch(`${url}/locks/api/locks/force-release`, {
      method: 'POST',
      headers: { cookie: 'session=ops', origin: 'https://evil.example', 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'job:nightly', backend: 'shared' }),
    });
    const aborted = lease.signal.aborted;
    await lease.release().catch(() => undefined);
    expect({ preflightAllowsEvil: preflight.headers.get('access-control-allow-origin') === 'https://evil.example', post: post.status, aborted }).toEqual({
      preflightAllowsEvil: true, // the application's CORS answers it: not the board's doing
      post: 403, // ...but the board must still refuse an Origin that is not its own
      aborted: false,
    });
  });

  it('no spelling of the routes gets past the guard (case, slashes, encoding, HEAD/OPTIONS, method override)', async () => {
    const { port, locks } = await start({ guard: CookieGuard, readOnly: false });
    const lease = await locks.acquire('guarded-key', { purpose: 'efficiency', backend: 'shared', ttl: 20_000 });
    const seen: string[] = [];
    for (const target of ['/LOCKS', '/LOCKS/api/locks', '/locks/', '/locks/api/locks/', '//locks/api/locks', '/locks//api/locks', '/%6Cocks/api/locks', '/locks/api/%6Cocks', '/locks/api/locks;x', '/locks/api/locks%3Fx', '/locks/./api/locks', '/x/../locks/api/locks', '/locks/board.js']) {
      for (const method of ['GET', 'HEAD', 'OPTIONS']) {
        const answer = await rawRequest(port, `${method} ${target} HTTP/1.1`, { Host: `127.0.0.1:${port}` });
        if (answer.status < 300 || answer.body.includes('guarded-key')) seen.push(`${method} ${target} → ${answer.status}`);
      }
    }
    const post = await rawRequest(port, 'POST /locks/api/locks/force-release HTTP/1.1', { Host: `127.0.0.1:${port}`, 'Content-Type': 'application/json', 'X-HTTP-Method-Override': 'POST' }, JSON.stringify({ key: 'guarded-key', backend: 'shared' }));
    const get = await rawRequest(port, 'GET /locks/api/locks/force-release HTTP/1.1', { Host: `127.0.0.1:${port}`, 'X-HTTP-Method-Override': 'POST' });
    const aborted = lease.signal.aborted;
    await lease.release();
    // OPTIONS may answer 2xx without running anything (an Allow list): only a body with the key or a release counts.
    expect({ leaked: seen.filter((line) => !/^OPTIONS .* → 20[04]$/.test(line)), post: post.status, get: get.status, aborted }).toEqual({ leaked: [], post: 403, get: 404, aborted: false });
  });

  it(`a guard option that is a function but no guard fails the start (${name}); the board never serves without it`, async () => {
    // Accepted by resolveBoardOptions (typeof guard === 'function'): Nest constructs it and must refuse it.
    function notAGuard(): boolean {
      return false;
    }
    const started = await start({ guard: notAGuard as never }).then(
      async ({ url }) => (await fetch(`${url}/locks`)).status,
      (error: Error) => `bootstrap failed: ${error.constructor.name}`,
    );
    expect(String(started)).toMatch(/^bootstrap failed/);
  });
});
