import type { CanActivate, Type } from '@nestjs/common';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';

/** `DistributedLockBoardModule.forRoot()`'s options. Access must be decided: a `guard`, or `public: true`. */
export interface DistributedLockBoardOptions {
  /** Where the page is mounted; its JSON is at `${path}/api/locks`. @default '/locks' */
  path?: string;
  /** true: look only. false: a force-release button, and `POST ${path}/api/locks/force-release`. @default true */
  readOnly?: boolean;
  /** true: no guard — anyone who reaches the app sees the keys (and, with `readOnly: false`, frees them). */
  public?: boolean;
  /**
   * Who may see the board: a Nest guard (a class, resolved in the board's module — its
   * dependencies must be global — or an instance). Set `request.user` in it and force-releases are
   * logged with that user.
   */
  guard?: Type<CanActivate> | CanActivate;
}

export interface ResolvedBoardOptions {
  path: string;
  readOnly: boolean;
  public: boolean;
  guard?: Type<CanActivate> | CanActivate;
}

const WHERE = 'DistributedLockBoardModule.forRoot()';
const FIELDS = ['path', 'readOnly', 'public', 'guard'];
/** Plain path segments only: nothing a route parser or a browser would read as more than text. */
const PATH = /^(\/[A-Za-z0-9._~-]+)+$/;

/** The board's options, checked: a bad field fails the application's start, naming it. */
export function resolveBoardOptions(options: unknown): ResolvedBoardOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidLockOptionsError('options', 'must be an object { path?, readOnly?, public?, guard? } with a guard or public: true', WHERE);
  }
  for (const field of Object.keys(options)) {
    if (!FIELDS.includes(field)) throw new InvalidLockOptionsError(field, `unknown option (known: ${FIELDS.join(', ')})`, WHERE);
  }
  const o = options as DistributedLockBoardOptions;
  const path = o.path ?? '/locks';
  if (typeof path !== 'string' || !PATH.test(path) || path.split('/').some((s) => s === '.' || s === '..') || path.length > 200) {
    throw new InvalidLockOptionsError('path', `must look like '/locks' or '/ops/locks' (segments of letters, digits and . _ ~ -; no trailing slash), got ${JSON.stringify(path)}`, WHERE);
  }
  for (const field of ['readOnly', 'public'] as const) {
    if (o[field] !== undefined && typeof o[field] !== 'boolean') throw new InvalidLockOptionsError(field, `must be true or false, got ${JSON.stringify(o[field])}`, WHERE);
  }
  const guard = o.guard;
  // A class whose instances have canActivate(), or such an instance: a bare function would be
  // constructed by Nest and fail only at the first request, or pass nothing through at all.
  const isGuard =
    (typeof guard === 'function' && typeof (guard as { prototype?: { canActivate?: unknown } }).prototype?.canActivate === 'function') ||
    (typeof guard === 'object' && guard !== null && typeof (guard as CanActivate).canActivate === 'function');
  if (guard !== undefined && !isGuard) throw new InvalidLockOptionsError('guard', 'must be a Nest guard: a class implementing CanActivate, or an object with canActivate()', WHERE);
  if (guard !== undefined && o.public === true) throw new InvalidLockOptionsError('public', 'public: true and a guard contradict each other: keep one', WHERE);
  if (guard === undefined && o.public !== true) {
    throw new InvalidLockOptionsError('guard', 'the board shows every held key and can free them: give it a guard (who may see it), or say public: true', WHERE);
  }
  return { path, readOnly: o.readOnly ?? true, public: o.public === true, ...(guard === undefined ? {} : { guard }) };
}
