import { randomBytes } from 'node:crypto';

/**
 * 128 random bits, drawn once per process (per thread: each has its own module instances): no two
 * share it. So an owner id that starts with it belongs to an acquisition of this very process — a
 * Redis release hands such a waiter its whole ttl at once (see redis.scripts.ts).
 */
export const PROCESS_OWNER_PREFIX = randomBytes(16).toString('base64url');
let ownerCount = 0;

/**
 * A fresh id per acquisition: ownership must never be shared by a whole process. The process's
 * random prefix and a counter: unique like a UUID per acquisition, at a fraction of the cost
 * (randomUUID, and randomBytes per call before it, showed in every profile) and 10 bytes shorter
 * on the wire. Never contains a dot (a multi-key lease's keys are held by `<owner>.<gen>-<index>`).
 */
export const newOwnerId = (): string => PROCESS_OWNER_PREFIX + (ownerCount++).toString(36);
