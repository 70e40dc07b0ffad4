import { isWellFormed } from '../../common/checks.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';

/**
 * One path segment for any string: encodeURIComponent (every character ZooKeeper refuses in a
 * path — controls, surrogates, U+FFF0… — and `/` come out as `%XX`), and `.` too, so a key `.`
 * or `..` can never be a relative segment. Distinct strings give distinct segments.
 */
export function pathSegment(value: string, backend: string): string {
  if (!isWellFormed(value)) {
    throw new InvalidLockOptionsError('key', 'it contains a lone UTF-16 surrogate (not well-formed Unicode)', `the ${backend} backend`);
  }
  return encodeURIComponent(value).replaceAll('.', '%2E');
}

/**
 * The key whose segment `child` is (pathSegment's inverse); undefined for a name pathSegment never
 * makes — a znode put under the prefix by hand: another spelling of a key (`%2e`) would list the
 * key twice, and inspect() would read the other line.
 */
export function keyOfSegment(child: string): string | undefined {
  try {
    const key = decodeURIComponent(child);
    return pathSegment(key, 'zookeeper') === child ? key : undefined;
  } catch {
    return undefined;
  }
}

/** A lock's parent znode: `<prefix>/<encoded key>`; its children are the holder and the queue. */
export function lockParent(prefix: string, key: string, backend: string): string {
  return `${prefix}/${pathSegment(key, backend)}`;
}

/** Digits ZooKeeper appends to a sequential znode's name. */
const SEQUENCE_DIGITS = 10;

/** The name (before ZooKeeper's sequence) of an owner's znode: `<owner>-`. */
export const nodeNamePrefix = (owner: string, backend: string): string => `${pathSegment(owner, backend)}-`;

/**
 * The name (before ZooKeeper's sequence) of an owner's znode in a semaphore of `permits`:
 * `<owner>%S<permits>-`. In the name, not the data: every acquirer reads the line's names anyway,
 * so a plain acquirer sees a semaphore ahead of it (and a semaphore one another's permits) without
 * a read per znode. Unambiguous: an encoded owner has `%` only before two hex digits, never `S`.
 */
export const semaphoreNamePrefix = (owner: string, permits: number, backend: string): string => `${pathSegment(owner, backend)}%S${permits}-`;

/** The permits a znode of the line was created with: 1 for a plain lock's (or any other name). */
export function permitsOfNode(child: string): number {
  const match = SEMAPHORE_NAME.exec(child);
  return match ? Number(match[1]) : 1;
}
const SEMAPHORE_NAME = /%S(\d+)-\d{10}$/;

/** Whether `child` is a plain lock's znode (not a semaphore's, of any permits). */
export const isPlainNode = (child: string): boolean => !SEMAPHORE_NAME.test(child);

/** The owner whose znode `child` is (`<encoded owner>[%S<permits>]-` + 10 digits). */
export function ownerOfNode(child: string): string {
  const name = child.slice(0, -(SEQUENCE_DIGITS + 1));
  const permits = name.indexOf('%S');
  return decodeURIComponent(permits >= 0 ? name.slice(0, permits) : name);
}

/** Whether `child` is the znode of the owner whose name prefix is `prefix` (`<owner>-` + 10 digits). */
export const isNodeOf = (child: string, prefix: string): boolean => child.length === prefix.length + SEQUENCE_DIGITS && child.startsWith(prefix);

/** Children in line order: by the sequence ZooKeeper appended (names without one sort last). */
export function inLineOrder(children: readonly string[]): string[] {
  return [...children].sort((a, b) => sequenceOf(a) - sequenceOf(b));
}

function sequenceOf(child: string): number {
  const digits = child.slice(-SEQUENCE_DIGITS);
  return /^\d{10}$/.test(digits) ? Number(digits) : Number.POSITIVE_INFINITY;
}

/**
 * The holders of a line in order (`inLineOrder`) whose first znode is a semaphore's: the first
 * znodes, at most its permits, up to one with other permits (that one refuses itself).
 */
export function semaphoreHolders(ordered: readonly string[]): string[] {
  const permits = ordered.length > 0 ? permitsOfNode(ordered[0]) : 0;
  const holders: string[] = [];
  for (const child of ordered.slice(0, permits)) {
    if (permitsOfNode(child) !== permits) break;
    holders.push(child);
  }
  return holders;
}

/** The paths from the root down to `path` itself: `/a/b` → `/a`, `/a/b`. */
export function ancestry(path: string): string[] {
  const segments = path.split('/').slice(1);
  return segments.map((_, i) => `/${segments.slice(0, i + 1).join('/')}`);
}

/** An 8-byte zxid as a bigint. */
export const zxid = (bytes: Buffer): bigint => bytes.readBigInt64BE(0);
