import { Module, type INestApplication, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { DistributedLockModule, DistributedLockService, InvalidLockOptionsError, LeaseLostError, MemoryBackend } from '../../lib/index.js';
import { DistributedLockBoardModule, type BoardView, type DistributedLockBoardOptions } from '../../lib/board/index.js';
import { TokenGuard } from '../harness/board-guard.js';
import { redisUrl, startLockApp, uniqueKey } from '../harness/lock-app.js';

// The lock board's HTTP side on both adapters: who may see it, what read-only refuses, and what
// a force-release does to the holder (another application on the same Redis).

/** Every line the application logs, to check what a force-release leaves behind. */
class Lines implements LoggerService {
  readonly lines: string[] = [];
  log(message: unknown): void {
    this.lines.push(String(message));
  }
  warn(message: unknown): void {
    this.lines.push(String(message));
  }
  error(message: unknown): void {
    this.lines.push(String(message));
  }
}

const ADAPTERS = [
  ['Express', () => new ExpressAdapter()],
  ['Fastify', () => new FastifyAdapter()],
] as const;

async function boardApp(adapter: () => ExpressAdapter | FastifyAdapter, board: DistributedLockBoardOptions, logger = new Lines()): Promise<{ app: INestApplication; url: string; locks: DistributedLockService }> {
  @Module({ imports: [DistributedLockModule.forRoot({ redis: { url: redisUrl() } }), DistributedLockBoardModule.forRoot(board)] })
  class AppModule {}
  const app = await NestFactory.create(AppModule, adapter(), { logger });
  await app.listen(0, '127.0.0.1');
  return { app, url: (await app.getUrl()).replace('[::1]', '127.0.0.1'), locks: app.get(DistributedLockService) };
}

describe.each(ADAPTERS)('lock board API (%s)', (_name, adapter) => {
  const apps: INestApplication[] = [];
  afterAll(async () => {
    for (const app of apps) await app.close();
  });
  const start = async (board: DistributedLockBoardOptions, logger?: Lines): Promise<{ url: string; locks: DistributedLockService }> => {
    const started = await boardApp(adapter, board, logger);
    apps.push(started.app);
    return started;
  };

  it('a guard decides: no token, 403 on the page, the JSON and the POST; with it, the page and the locks', async () => {
    const { url, locks } = await start({ guard: TokenGuard, readOnly: false });
    const key = uniqueKey('board-guard');
    const lease = await locks.acquire(key, { purpose: 'efficiency', ttl: 20_000 });
    for (const [path, init] of [
      ['/locks', {}],
      ['/locks/api/locks', {}],
      ['/locks/api/locks/force-release', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key, backend: 'redis' }) }],
    ] as const) {
      expect((await fetch(url + path, init)).status).toBe(403);
    }
    expect(lease.signal.aborted).toBe(false);
    const auth = { authorization: 'Bearer ops-token' };
    const page = await fetch(`${url}/locks`, { headers: auth });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await page.text()).toContain(key);
    const view = (await (await fetch(`${url}/locks/api/locks?prefix=${encodeURIComponent(key)}`, { headers: auth })).json()) as BoardView;
    expect(view.backends.map((b) => b.name)).toEqual(['redis']);
    expect(view.backends[0].locks).toEqual([expect.objectContaining({ key, backend: 'redis', purpose: 'efficiency', local: true, waiters: 0 })]);
    await lease.release();
  });

  it('public: no guard needed; read-only by default: POST is refused and the key stays held', async () => {
    const { url, locks } = await start({ public: true });
    const key = uniqueKey('board-public');
    const lease = await locks.acquire(key, { purpose: 'efficiency', ttl: 20_000 });
    expect((await fetch(`${url}/locks`)).status).toBe(200);
    const refused = await fetch(`${url}/locks/api/locks/force-release`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key, backend: 'redis' }) });
    expect(refused.status).toBe(403);
    expect(lease.signal.aborted).toBe(false);
    expect(await locks.inspect(key, { backend: 'redis' })).not.toBeNull();
    await lease.release();
  });

  it('force-release over POST with a JSON body frees the key; the holder in another process is told; who and what are logged', async () => {
    const logger = new Lines();
    // The holder first: Nest's static logger is the last application's, and the board's must be.
    const holder = await startLockApp({ redis: { url: redisUrl() } });
    const { url } = await start({ guard: TokenGuard, readOnly: false }, logger);
    try {
      const key = uniqueKey('board-release <b>');
      const lease = await holder.locks.acquire(key, { purpose: 'efficiency', ttl: 20_000 });
      const post = (body: string, type = 'application/json', extra: Record<string, string> = {}): Promise<Response> =>
        fetch(`${url}/locks/api/locks/force-release`, { method: 'POST', headers: { authorization: 'Bearer ops-token', 'content-type': type, ...extra }, body });

      // No CSRF by a form or a link: a form's content types, a GET, a cross-site browser request.
      expect((await post(`key=${encodeURIComponent(key)}&backend=redis`, 'application/x-www-form-urlencoded')).status).toBe(415);
      expect((await post(JSON.stringify({ key, backend: 'redis' }), 'text/plain')).status).toBe(415);
      expect((await fetch(`${url}/locks/api/locks/force-release?key=${encodeURIComponent(key)}&backend=redis`, { headers: { authorization: 'Bearer ops-token' } })).status).toBe(404);
      expect((await post(JSON.stringify({ key, backend: 'redis' }), 'application/json', { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
      // Bad bodies name the field.
      for (const [body, field] of [
        [{ backend: 'redis' }, 'key'],
        [{ key, backend: 'nope' }, 'backend'],
        [{ key: '', backend: 'redis' }, 'key'],
        [[key, 'redis'], 'key'],
      ] as const) {
        const answer = await post(JSON.stringify(body));
        expect([answer.status, ((await answer.json()) as { field?: string }).field]).toEqual([400, field]);
      }
      expect(lease.signal.aborted).toBe(false);

      const response = await post(JSON.stringify({ key, backend: 'redis' }));
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ key, backend: 'redis', released: true });
      for (let i = 0; i < 200 && !lease.signal.aborted; i++) await new Promise((r) => setTimeout(r, 10));
      expect((lease.signal.reason as LeaseLostError).reason).toBe('force-released');
      expect(await holder.locks.inspect(key, { backend: 'redis' })).toBeNull();
      expect(await (await post(JSON.stringify({ key, backend: 'redis' }))).json()).toEqual({ key, backend: 'redis', released: false });
      const logged = logger.lines.filter((line) => line.startsWith(`force-release of ${JSON.stringify(key)} `));
      expect(logged[0]).toBe(`force-release of ${JSON.stringify(key)} on backend "redis" by id "alice" from 127.0.0.1: released (its holder is told)`);
      expect(logged[1]).toContain('nobody held it');
    } finally {
      await holder.close();
    }
  });

  it('bad query options are a 400 naming the field, not a 500', async () => {
    const { url } = await start({ public: true });
    for (const [query, field] of [
      ['limit=0', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=1e9', 'limit'],
    ]) {
      const response = await fetch(`${url}/locks/api/locks?${query}`);
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ field });
    }
  });
});

describe('DistributedLockBoardModule.forRoot(): refuses to mount until access is decided', () => {
  it.each([
    ['no guard, not public', {}, 'guard'],
    ['public: false', { public: false }, 'guard'],
    ['a guard and public: true', { guard: TokenGuard, public: true }, 'public'],
    ['a guard that is not one', { guard: 'admin' }, 'guard'],
    ['a function that is no guard class', { guard: () => true }, 'guard'],
    ['an object without canActivate', { guard: { check: () => true } }, 'guard'],
    ['a path without its slash', { public: true, path: 'locks' }, 'path'],
    ['a path with a trailing slash', { public: true, path: '/locks/' }, 'path'],
    ['a path with ..', { public: true, path: '/a/../b' }, 'path'],
    ['a path with a route parameter', { public: true, path: '/:id' }, 'path'],
    ["readOnly: 'no'", { public: true, readOnly: 'no' }, 'readOnly'],
    ['an unknown field', { public: true, title: 'x' }, 'title'],
  ])('%s → %s', (_label, options, field) => {
    let error: unknown;
    try {
      DistributedLockBoardModule.forRoot(options as DistributedLockBoardOptions);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidLockOptionsError);
    expect((error as InvalidLockOptionsError).field).toBe(field);
  });

  it('without DistributedLockModule in the application, it fails at bootstrap with a message saying so', async () => {
    @Module({ imports: [DistributedLockBoardModule.forRoot({ public: true })] })
    class Lonely {}
    const app = await NestFactory.create(Lonely, new ExpressAdapter(), { logger: false, abortOnError: false });
    await expect(app.init()).rejects.toThrow(/import DistributedLockModule/);
    await app.close().catch(() => undefined);
  });

  it('a memory backend shows on the board too, with how long each key has been held', async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ backends: { shared: new MemoryBackend('shared') } }), DistributedLockBoardModule.forRoot({ public: true })] })
    class AppModule {}
    const app = await NestFactory.create(AppModule, new ExpressAdapter(), { logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const lease = await app.get(DistributedLockService).acquire('job', { purpose: 'efficiency', ttl: 5_000 });
      await new Promise((r) => setTimeout(r, 30));
      const view = (await (await fetch(`${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/locks/api/locks`)).json()) as BoardView;
      expect(view.backends[0].locks[0]).toMatchObject({ key: 'job', token: lease.token!.toString(), local: true });
      expect(view.backends[0].locks[0].heldForMs).toBeGreaterThanOrEqual(25);
      await lease.release();
    } finally {
      await app.close();
    }
  });
});
