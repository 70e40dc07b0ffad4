import type { INestApplicationContext } from '@nestjs/common';
import { LOCK_BACKENDS, type LockBackend } from '../../lib/backends/lock-backend.interface.js';

/** The backends a running application's lock module built (or was given), by name — for white-box checks. */
export function backendsOf(app: INestApplicationContext): Map<string, LockBackend> {
  return app.get<Map<string, LockBackend>>(LOCK_BACKENDS);
}
