/** Injection token of the validated, defaulted module options (`ResolvedModuleOptions`). */
export const RESOLVED_LOCK_OPTIONS = Symbol('RESOLVED_LOCK_OPTIONS');

/** Nest logger context of every line this module logs. */
export const LOGGER_CONTEXT = 'DistributedLock';
