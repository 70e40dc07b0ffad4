import { Injectable, type CanActivate, type ExecutionContext } from '@nestjs/common';

/** The board specs' guard: a bearer token, and the user it stands for on the request (logged with each force-release). */
@Injectable()
export class TokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined>; user?: unknown }>();
    if (request.headers.authorization !== 'Bearer ops-token') return false;
    request.user = { id: 'alice' };
    return true;
  }
}
