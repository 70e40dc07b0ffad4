import { Injectable, UnauthorizedException, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { timingSafeEqual } from 'node:crypto';

/**
 * The lock board's demo guard: HTTP Basic with user `ops` and the password in BOARD_TOKEN. A
 * browser asks for it once and sends it with the page's own requests too. A real application
 * puts its own authentication here; whatever it sets as `request.user` is logged with each
 * force-release.
 */
@Injectable()
export class DemoTokenGuard implements CanActivate {
  // main.ts makes one up when BOARD_TOKEN is not set; without one at all, nobody gets in.
  private readonly expected = process.env.BOARD_TOKEN ? Buffer.from(`ops:${process.env.BOARD_TOKEN}`) : undefined;

  canActivate(context: ExecutionContext): boolean {
    const http = context.switchToHttp();
    const request = http.getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    const [scheme, encoded] = (request.headers.authorization ?? '').split(' ');
    const given = scheme === 'Basic' && encoded ? Buffer.from(encoded, 'base64') : Buffer.alloc(0);
    if (this.expected && given.length === this.expected.length && timingSafeEqual(given, this.expected)) {
      request.user = { id: 'ops' };
      return true;
    }
    // Express and Fastify both have header(): the browser shows its login prompt on this one.
    http.getResponse<{ header(name: string, value: string): unknown }>().header('WWW-Authenticate', 'Basic realm="locks", charset="UTF-8"');
    throw new UnauthorizedException('the lock board needs the demo credentials (user ops, password BOARD_TOKEN)');
  }
}
