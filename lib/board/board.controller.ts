import {
  BadRequestException,
  Body,
  Controller,
  ForbiddenException,
  Get,
  Header,
  HttpCode,
  Logger,
  Post,
  Query,
  Req,
  ServiceUnavailableException,
  UnsupportedMediaTypeException,
  UseGuards,
  type Type,
} from '@nestjs/common';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { BOARD_CSS, BOARD_JS } from './board-assets.js';
import type { ResolvedBoardOptions } from './board-options.js';
import { BOARD_CSP, renderBoardPage } from './board-page.js';
import { BoardLocks } from './board-locks.js';

/** What the board reads of a request, on Express and Fastify alike. */
interface BoardRequest {
  headers: Record<string, string | string[] | undefined>;
  ip?: string;
  url?: string;
  originalUrl?: string;
  /** Set by the application's guard, when it knows who asks. */
  user?: unknown;
}

const NO_SNIFF = ['X-Content-Type-Options', 'nosniff'] as const;
const NO_STORE = ['Cache-Control', 'no-store'] as const;

/** The user a guard put on the request, for the log: a string, or an id-like field of an object. */
function whoAsks(request: BoardRequest): string {
  const user = request.user;
  if (typeof user === 'string' && user !== '') return JSON.stringify(user);
  if (typeof user === 'object' && user !== null) {
    for (const field of ['id', 'username', 'name', 'email', 'sub']) {
      const value = (user as Record<string, unknown>)[field];
      if (typeof value === 'string' || typeof value === 'number') return `${field} ${JSON.stringify(String(value))}`;
    }
    return 'a user without id';
  }
  return 'an anonymous caller';
}

const header = (request: BoardRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

/**
 * The API answers the board's own page only. A browser says where a request comes from:
 * `Sec-Fetch-Site` (anything but same-origin is refused), or on browsers without it `Origin`
 * (its host must be the one asked, directly or through a proxy's X-Forwarded-Host). So even an
 * application that enables CORS with credentials for its own API does not let another site read
 * the held keys or free one.
 */
function refuseOtherOrigins(request: BoardRequest): void {
  const site = header(request, 'sec-fetch-site');
  if (site !== undefined) {
    if (site !== 'same-origin' && site !== 'none') throw new ForbiddenException('the lock board answers its own page only (Sec-Fetch-Site: ' + site + ')');
    return;
  }
  const origin = header(request, 'origin');
  if (origin === undefined) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    throw new ForbiddenException('the lock board answers its own page only (a malformed Origin)');
  }
  if (host !== header(request, 'host') && host !== header(request, 'x-forwarded-host')) throw new ForbiddenException('the lock board answers its own page only (Origin ' + origin + ')');
}

/** A state change must come as JSON: a form (the only cross-site request without a preflight) cannot send it. */
function requireJson(request: BoardRequest): void {
  const type = String(header(request, 'content-type') ?? '').split(';')[0].trim().toLowerCase();
  if (type !== 'application/json') throw new UnsupportedMediaTypeException('send a JSON body (Content-Type: application/json): { "key": …, "backend": … }');
}

/**
 * The page's own path, from the request (a global prefix or a proxy's path stays in it): only its
 * path — an absolute-form target (`GET http://elsewhere/locks`) or leading `//` must not turn the
 * page's script and API addresses into another host's.
 */
function pagePath(request: BoardRequest, fallback: string): string {
  let path: string;
  try {
    path = new URL(request.originalUrl ?? request.url ?? fallback, 'http://board.invalid').pathname;
  } catch {
    return fallback;
  }
  path = path.replace(/\/{2,}/g, '/').replace(/\/+$/, '');
  return path.startsWith('/') ? path : fallback;
}

/** A controller mounted at the board's path (a class per forRoot(): Nest routes by class decorators). */
export function createBoardController(options: ResolvedBoardOptions): Type<unknown> {
  const logger = new Logger('DistributedLockBoard');

  @Controller(options.path)
  class DistributedLockBoardController {
    constructor(private readonly locks: BoardLocks) {}

    @Get()
    @Header('Content-Type', 'text/html; charset=utf-8')
    @Header('Content-Security-Policy', BOARD_CSP)
    @Header('X-Frame-Options', 'DENY')
    @Header('Referrer-Policy', 'no-referrer')
    @Header(...NO_SNIFF)
    @Header(...NO_STORE)
    async page(@Req() request: BoardRequest): Promise<string> {
      return renderBoardPage(await this.locks.view(options.readOnly), pagePath(request, options.path));
    }

    @Get('board.js')
    @Header('Content-Type', 'text/javascript; charset=utf-8')
    @Header(...NO_SNIFF)
    script(): string {
      return BOARD_JS;
    }

    @Get('board.css')
    @Header('Content-Type', 'text/css; charset=utf-8')
    @Header(...NO_SNIFF)
    style(): string {
      return BOARD_CSS;
    }

    @Get('api/locks')
    @Header(...NO_STORE)
    async api(@Req() request: BoardRequest, @Query('prefix') prefix?: string, @Query('limit') limit?: string): Promise<unknown> {
      refuseOtherOrigins(request);
      try {
        return await this.locks.view(options.readOnly, { prefix, limit: limit === undefined ? undefined : Number(limit) });
      } catch (error) {
        if (error instanceof InvalidLockOptionsError) throw new BadRequestException({ message: error.message, field: error.field });
        throw error;
      }
    }

    @Post('api/locks/force-release')
    @HttpCode(200)
    @Header(...NO_STORE)
    async forceRelease(@Req() request: BoardRequest, @Body() body: unknown): Promise<unknown> {
      if (options.readOnly) throw new ForbiddenException('the lock board is read-only (DistributedLockBoardModule.forRoot({ readOnly: false }) allows force-release)');
      refuseOtherOrigins(request);
      requireJson(request);
      const { key, backend } = (typeof body === 'object' && body !== null ? body : {}) as { key?: unknown; backend?: unknown };
      if (typeof key !== 'string') throw new BadRequestException({ message: 'body.key must be a string', field: 'key' });
      if (typeof backend !== 'string' || !this.locks.backendNames().includes(backend)) {
        throw new BadRequestException({ message: `body.backend must name a configured backend (${this.locks.backendNames().join(', ')})`, field: 'backend' });
      }
      const who = `${whoAsks(request)} from ${request.ip ?? 'an unknown address'}`;
      try {
        const released = await this.locks.forceRelease(key, backend);
        logger.warn(`force-release of ${JSON.stringify(key)} on backend "${backend}" by ${who}: ${released ? 'released (its holder is told)' : 'nobody held it'}`);
        return { key, backend, released };
      } catch (error) {
        logger.warn(`force-release of ${JSON.stringify(key)} on backend "${backend}" by ${who} failed: ${(error as Error)?.message ?? String(error)}`);
        if (error instanceof InvalidLockOptionsError) throw new BadRequestException({ message: error.message, field: error.field });
        if (error instanceof LockBackendUnavailableError) throw new ServiceUnavailableException(error.message);
        throw error;
      }
    }
  }

  if (options.guard) UseGuards(options.guard)(DistributedLockBoardController);
  return DistributedLockBoardController;
}
