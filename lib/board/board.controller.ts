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

/**
 * A state change from another site could only come from a form (no JSON content type without a
 * CORS preflight, which this board never answers) — refused; and a browser that says the request
 * is cross-site is refused whatever it sends.
 */
function refuseCrossSite(request: BoardRequest): void {
  const type = String(request.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type !== 'application/json') throw new UnsupportedMediaTypeException('send a JSON body (Content-Type: application/json): { "key": …, "backend": … }');
  const site = request.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw new ForbiddenException('cross-site requests cannot force a release');
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
      // Assets and API are addressed from the page's own URL: a global prefix or a proxy's path stays in it.
      const path = (request.originalUrl ?? request.url ?? options.path).split('?')[0].replace(/\/+$/, '');
      return renderBoardPage(await this.locks.view(options.readOnly), path);
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
    async api(@Query('prefix') prefix?: string, @Query('limit') limit?: string): Promise<unknown> {
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
      refuseCrossSite(request);
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
