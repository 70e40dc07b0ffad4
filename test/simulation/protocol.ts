/** What the simulation controller and its worker processes say to each other (IPC). */
import type { ControlMode, DecoSpec, FiberOp, KeyNs, LockBackendName, Purpose, Store } from './plan.js';

export interface WorkerConfig {
  role: 'worker' | 'probe';
  worker: number;
  incarnation: number;
  /** Namespace of this seed's keys and registers on the shared servers. */
  runId: string;
  redisUrl: string;
  /** The client the Redis backend runs on (plan.redisClients); absent: ioredis. */
  redisClient?: 'ioredis' | 'node-redis' | 'iovalkey';
  etcdHosts: string[];
  registerRedisUrl: string;
  registerEtcdHosts: string[];
  /** The PostgreSQL backend's connection string (through the worker's 'postgres' proxy). */
  postgresUrl: string;
  /** The PgFence register's (the same PostgreSQL, through the worker's register proxy). */
  registerPostgresUrl: string;
  /** The MySQL backend's URL (MariaDB, through the worker's 'mysql' proxy). */
  mysqlUrl: string;
  /** The MySqlFence register's (the same MariaDB, through the worker's register proxy). */
  registerMysqlUrl: string;
  /** The ZooKeeper backend's connection string (through the worker's 'zookeeper' proxy). */
  zookeeperConnectionString: string;
  /** The Redlock backend's five masters (each through one of the worker's 'redlock' proxies). */
  redlockUrls: string[];
  sessionTtlSeconds: number;
  keys: number;
  fibers: FiberOp[][];
  /** The decorated methods the app provides (plan.decorated). */
  decorated: DecoSpec[];
  control?: ControlMode;
  /** probe: acquire every lock, each within its bound counted from `since` (wall clock, ms). */
  probe?: { since: number; locks: Array<{ key: number; purpose: Purpose; backend?: LockBackendName; ns?: KeyNs; permits?: number; boundMs: number }> };
}

export type WorkerCommand =
  | { cmd: 'go' }
  | { cmd: 'close-app'; downMs: number }
  /**
   * To the watcher: the edge fiber of worker `w` asked for a multi-key lease (request `id`) with
   * key `key` among its keys: watch that key until the backend shows it held by a multi-key owner,
   * then forceRelease() it and take it (tryAcquire, `ttl`, held `holdMs`). `last`: the set's
   * highest key (the last the attempt takes, the `count - 1`-th).
   */
  | { cmd: 'watch'; id: string; key: number; purpose: Purpose; backend?: LockBackendName; holdMs: number; ttl: number; last: number; count: number }
  /** …the request `id` has its answer (a grant, busy, a failure): stop watching for it. */
  | { cmd: 'unwatch'; id: string }
  | { cmd: 'drain' }
  | { cmd: 'exit' };

/** Register value: the list of appended elements, each with the token its write carried. */
export type RegisterList = Array<[el: string, token: string | null]>;

/** `rolledback`: an `xact` holder's write its transaction never committed (rolled back, or its connection closed) — never in the register. */
export type WriteResult = 'ok' | 'stale' | 'unknown' | 'refused' | 'rolledback';

export type SimEventBody =
  | { ev: 'ready' }
  /** `backend`: 'postgres', 'mysql', 'zookeeper' or 'redlock' when the lock was taken there (absent: routed by purpose). */
  | {
      ev: 'req';
      id: string;
      key: number;
      purpose: Purpose;
      backend?: LockBackendName;
      kind: string;
      ttl: number;
      wait: number;
      parent?: string;
      ns?: KeyNs;
      permits?: number;
      keys?: number[];
      /** The edge fiber's multi-key request the watcher is to go after (the runner passes it on). */
      watch?: { key: number; holdMs: number; ttl: number };
    }
  /**
   * `root`: the lease (id) whose validity this is — itself, or the outer lease of a reentrant handle.
   * A multi-key lease also says its engine owner id and the generation its keys were taken in (each
   * key's owner on the backend is `<owner>.<gen>-<index>`): a forceRelease() that removed one of
   * them (`force-done`'s `owner`) before the grant left the lease without that key.
   */
  | {
      ev: 'grant';
      id: string;
      key: number;
      purpose: Purpose;
      backend?: LockBackendName;
      token?: string;
      V?: number;
      reentrant: boolean;
      root: string;
      ns?: KeyNs;
      permits?: number;
      keys?: number[];
      owner?: string;
      gen?: number;
      /** A MySqlTransactionLock holder (`xact`): no ttl — valid until its COMMIT / ROLLBACK is sent or its connection dies. */
      xact?: boolean;
    }
  /**
   * Right after a watched multi-key grant (the edge fiber's), who the backend shows holding the
   * watched key: `owner` (undefined: nobody, or the look failed — `failed`). The attempt's own id
   * there means it holds that key on the server after its grant — through a queue place it took
   * again after a forceRelease() removed its earlier one (ZooKeeper re-queues an owner whose znode
   * is gone under the same id) — so that call did not leave the lease without it.
   */
  | { ev: 'held-check'; id: string; key: number; purpose: Purpose; backend?: LockBackendName; ns?: KeyNs; owner?: string; failed?: boolean }
  | { ev: 'busy'; id: string }
  | { ev: 'fail'; id: string; name: string; message: string }
  /** The holder's view at time t: valid until V (wall clock). Only sent while not aborted and V > t. */
  | { ev: 'sample'; id: string; V: number }
  /** `since` (an `xact` holder's): a statement of its transaction failed — the server may have ended the transaction from when it was sent. */
  | { ev: 'lost'; id: string; reason: string; since?: number }
  /** extend() called (a shorter ttl applies on the server as soon as this arrives). */
  | { ev: 'ext-req'; id: string; ttl: number }
  | { ev: 'ext-ok'; id: string; ttl: number; V?: number }
  | { ev: 'ext-fail'; id: string; name: string; message: string }
  /** The holder stops using the lease (just before release is called). */
  /** `how` (an `xact` holder's): commit, rollback or destroy — sent right after this. */
  | { ev: 'rel'; id: string; how?: string }
  | { ev: 'rel-done'; id: string; ok: boolean; message?: string }
  | { ev: 'read'; id: string; store: Store; key: number; ns?: KeyNs; token?: string; len: number; result: 'ok' | 'stale' | 'fail'; message?: string }
  /** Sent before the write: a worker killed before it hears the answer leaves a write of unknown outcome. */
  | { ev: 'write-start'; id: string; store: Store; key: number; ns?: KeyNs; el: string; token?: string }
  | { ev: 'write'; id: string; store: Store; key: number; ns?: KeyNs; el: string; token?: string; result: WriteResult; message?: string; leaseToken?: string }
  /** An operator's forceRelease() of a lock, called (`id`: the call's; `watch`: the watcher's, for that request). */
  | { ev: 'force'; id: string; key: number; purpose: Purpose; backend?: LockBackendName; ns?: KeyNs; watch?: string }
  /**
   * …and its answer: released (true: a holder was there; false: none), undefined if it failed
   * (outcome unknown); what inspect() said just before, if asked; the watcher's: the holder's owner
   * id the backend showed just before the call.
   */
  | { ev: 'force-done'; id: string; released?: boolean; message?: string; inspected?: string; owner?: string }
  /**
   * The watcher's watch for a request: started; ended `fired` (it saw a multi-key owner and forced
   * the key) or not (why). `complete`: right after the forceRelease() returned, whether that
   * owner's attempt held the set's last key too (false: it had not taken every key yet; undefined:
   * not known) — a lease of it granted later took its last key after the call.
   */
  | { ev: 'watch'; id: string; target: string; phase: 'start' | 'end'; fired?: boolean; owner?: string; why?: string; complete?: boolean }
  /** A campaign's signal aborted after its grant (the edge fiber's step-down): the term is to end. */
  | { ev: 'stepdown'; id: string }
  /** Work on `term.signal` (`id`: the term): started, and ended — by the signal, by its time running out, or by the drain. */
  | { ev: 'work'; id: string; phase: 'start' | 'end'; why?: 'signal' | 'done' | 'drain' }
  /** An operator's list() with the lock's name as the prefix, called… */
  | { ev: 'list'; id: string; key: number; purpose: Purpose; backend?: LockBackendName; ns?: KeyNs }
  /** …and its answer: whether the lock's name was among the keys, undefined if it failed. */
  | { ev: 'list-done'; id: string; listed?: boolean; message?: string }
  /**
   * The app's life; at 'closed' (app.close() returned), every key the closed app's backends were
   * asked to take (backend name, key as the backend names it) with the owner ids it asked for: the
   * runner then looks who holds them (invariant 5: a key held by one of them after the close).
   */
  | { ev: 'app'; state: 'closing' | 'closed' | 'up'; used?: Array<{ backend: string; key: string; owners: string[] }> }
  /**
   * From the runner, after an 'app closed' (w, inc: the closed app's worker): a key one of that
   * app's owners still held after close() returned — seen twice, `recheckMs` apart — and what
   * excuses it, if anything (a fault on that backend or the worker's way to it during the close).
   */
  | { ev: 'closed-held'; backend: string; key: string; owner: string; remainingMs: number; closedAt: number; recheckMs: number; excused?: string }
  /** From the runner: the keys of a closed app it looked at (and how many it could not). */
  | { ev: 'close-inspected'; keys: number; failed: number; closedAt: number }
  /** final: `above` = what was still above the baseline when the worker had finished (before settling). */
  | { ev: 'sizes'; phase: 'baseline' | 'final'; sizes: Record<string, number>; settledMs: number; above?: Record<string, number> }
  | { ev: 'exit-resources'; leaked: string[] }
  | { ev: 'drained' }
  | { ev: 'probe'; key: number; purpose: Purpose; backend?: LockBackendName; ns?: KeyNs; ok: boolean; elapsedMs: number; message?: string }
  | { ev: 'register'; store: Store | 'plain'; key: number; ns?: KeyNs; list: RegisterList | null }
  | { ev: 'note'; message: string }
  /** A decorated method's body ran without one of its declared leases (or after its caller unsubscribed). */
  | { ev: 'unlocked'; id: string; detail: string };

/** `t`: the worker's wall clock (Date-calibrated performance.now()), ms; `w`/`inc`: worker and incarnation. */
export type SimEvent = SimEventBody & { t: number; w: number; inc: number };

const NAMED_KEY_SEGMENT: Record<LockBackendName, string> = { postgres: 'pg', mysql: 'my', zookeeper: 'zk', redlock: 'rl' };

/**
 * A lock's key: on a backend named per lock a name of its own (`…/pg/k0`, `…/my/k0`, `…/zk/k0`, `…/rl/k0`), so
 * a context holding key 0 there and on a routed backend has two keys, and a fence's lockKey names
 * one lock.
 */
export const lockKeyName = (runId: string, key: number, backend?: LockBackendName, ns?: KeyNs): string => {
  const base = ns ? `${runId}/${ns}` : runId;
  return backend === undefined ? `${base}/k${key}` : `${base}/${NAMED_KEY_SEGMENT[backend]}/k${key}`;
};
/**
 * The etcd register of key k is named like the lock (a fence can match it to the lease on that
 * key); the Redis one is not (an implicit token must then come from an unambiguous context). The
 * PgFence register of key k is a row whose id is its PostgreSQL lock's key, the MySqlFence one a
 * row whose id is its MySQL lock's key. The ZooKeeper leases'
 * register is an EtcdFence one named like their ZooKeeper lock (its tokens are that lock's zxids,
 * another sequence than etcd's revisions: another register).
 */
export const registerName = (runId: string, key: number, store: Store, ns?: KeyNs): string =>
  store === 'etcd'
    ? lockKeyName(runId, key, undefined, ns)
    : store === 'postgres' || store === 'mysql' || store === 'zookeeper'
      ? lockKeyName(runId, key, store, ns)
      : `${ns ? `${runId}/${ns}` : runId}/register-${key}`;
export const REDIS_FENCE_PREFIX = 'sim:';
export const ETCD_FENCE_PREFIX = 'sim/fence/';
export const PLAIN_PREFIX = 'sim:plain:';
/** The PgFence register table (in the PostgreSQL the backend uses): `v` is the JSON list, `fence` PgFence's column. */
export const PG_REGISTER_TABLE = 'sim_register';
export const PG_REGISTER_DDL = `CREATE TABLE IF NOT EXISTS ${PG_REGISTER_TABLE} (id text PRIMARY KEY, v text NOT NULL, fence bigint NOT NULL DEFAULT 0)`;
/** The MySqlFence register table (in the MariaDB database the backend uses), the same columns. */
export const MYSQL_REGISTER_TABLE = 'sim_register';
export const MYSQL_REGISTER_DDL = `CREATE TABLE IF NOT EXISTS ${MYSQL_REGISTER_TABLE} (id VARCHAR(190) PRIMARY KEY, v LONGTEXT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`;
/** The database of the MySQL backend's tables and the register (created by the runner). */
export const MYSQL_DATABASE = 'ndl';

/**
 * A record bounded per key, not per owner (LockBackend.bookkeeping names them `…Cache`: keys seen
 * busy lately, ZooKeeper's idle-line clock, semaphore views by permits): it may keep the seed's
 * keys once nothing is held (invariant 5). Every other record is per owner and must go back to
 * its baseline.
 */
export const isKeyCache = (name: string): boolean => /Cache$/.test(name);
