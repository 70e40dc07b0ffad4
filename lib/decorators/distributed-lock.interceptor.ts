import {
  ConflictException,
  Injectable,
  Logger,
  ServiceUnavailableException,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { catchError, type Observable } from 'rxjs';
import { LOGGER_CONTEXT } from '../distributed-lock.constants.js';
import { LockBackendUnavailableError } from '../errors/lock-backend-unavailable.error.js';
import { LockBusyError } from '../errors/lock-busy.error.js';

/**
 * The only place that speaks HTTP: `LockBusyError` → 409 Conflict (with `Retry-After` when the
 * holder's remaining time is known), `LockBackendUnavailableError` → 503. Every other error —
 * the handler's own `HttpException`s included — passes through untouched. Applied by
 * `@DistributedLock` on each handler; can also be registered globally.
 */
@Injectable()
export class DistributedLockInterceptor implements NestInterceptor {
  private readonly logger = new Logger(LOGGER_CONTEXT);

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    return next.handle().pipe(
      catchError((error: unknown) => {
        if (error instanceof LockBusyError) {
          if (error.retryAfterMs !== undefined && error.retryAfterMs >= 0) {
            setHeader(context.switchToHttp().getResponse(), 'Retry-After', String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))));
          }
          throw new ConflictException(
            { statusCode: 409, error: 'Conflict', message: error.message, key: error.key, retryAfterMs: error.retryAfterMs },
            { cause: error },
          );
        }
        if (error instanceof LockBackendUnavailableError) {
          this.logger.warn(`503 for ${context.getClass().name}.${context.getHandler().name}: ${error.message}`);
          throw new ServiceUnavailableException(
            { statusCode: 503, error: 'Service Unavailable', message: 'The lock service is unavailable; try again later' },
            { cause: error },
          );
        }
        throw error;
      }),
    );
  }
}

/** Express (`setHeader`) and Fastify (`header`) responses. */
function setHeader(response: { header?: (n: string, v: string) => unknown; setHeader?: (n: string, v: string) => unknown }, name: string, value: string): void {
  if (typeof response.header === 'function') response.header(name, value);
  else response.setHeader?.(name, value);
}
