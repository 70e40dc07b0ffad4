import type { LockBackend, LockBackendCapabilities } from './lock-backend.interface.js';

/** What the module gives a built-in backend it builds. */
export interface BackendContext {
  /** The module's `driftFactor`. */
  readonly driftFactor: number;
  /** Where a backend reports connection outages of the clients it owns. */
  readonly log: { warn(message: string): void; log(message: string): void };
}

/**
 * A built-in backend as `forRoot()` sees it. Its key in the registry (`backend-registry.ts`) is the
 * `forRoot()` field it reads and the name it is registered under; everything else about it lives
 * in its own folder. The options layer reads what plugins declare and never the reverse.
 *
 * `Options`: what users write under that field (the type `DistributedLockModuleOptions` shows);
 * `Settings`: the same after `resolve()`, with every default filled in.
 */
export interface BackendPlugin<Options, Settings> {
  /** What every backend this plugin builds can promise (routing reads it before any is built). */
  readonly capabilities: LockBackendCapabilities;
  /**
   * Check the user's value of `forRoot()`'s `field` and fill in defaults, at bootstrap. Every error
   * names the field (`redis.commandTimeoutMs`). `undefined`: the value switches the backend off.
   */
  resolve(raw: unknown, field: string): Settings | undefined;
  /**
   * For a backend the user names (`memory: { name }`): that name, and the option that set it (a
   * clash with another backend is reported there). Without it, the backend's name is its field.
   */
  chosenName?(settings: Settings, field: string): { name: string; field: string };
  /**
   * Build the backend. A client is opened only when the settings carry none; the backend then owns
   * it (closes it in `close()`), and a client the application passed in stays open.
   */
  create(settings: Settings, name: string, context: BackendContext): Promise<LockBackend>;
  /** Type only, never set: carries `Options` to `DistributedLockModuleOptions`. */
  readonly optionsType?: Options;
}

/** The `forRoot()` option type a plugin reads. */
export type OptionsOf<P> = P extends BackendPlugin<infer Options, any> ? Options : never;

/** A built-in backend the module options switch on: the module builds it (and so owns it). */
export interface ConfiguredBackend {
  /** The `forRoot()` field that configured it. */
  readonly field: string;
  readonly name: string;
  readonly plugin: BackendPlugin<unknown, unknown>;
  /** What its plugin's `resolve()` made of the field, defaults filled in. */
  readonly settings: unknown;
}
