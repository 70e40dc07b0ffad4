/** Base class of every error this module throws: `err instanceof DistributedLockError`. */
export class DistributedLockError extends Error {
  /** The lock key the error is about, when there is one. */
  readonly key?: string;

  constructor(message: string, options?: { key?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.key = options?.key;
  }
}
