import { redisScript as script } from './redis-script.loader.js';
import { SEMAPHORE_FORCE_RELEASE, SEMAPHORE_INSPECT } from './redis-semaphore.scripts.js';

/**
 * Lua scripts of the Redis backend. Every name and value travels in KEYS / ARGV; nothing is
 * ever spliced into the script text.
 *
 * Keys of one lock (they share a hash tag, so they live in one Cluster slot):
 *   KEYS[1] lock  — the holder's owner id, with the lease ttl as its expiry
 *   KEYS[2] queue — sorted set of waiting owner ids by arrival (server time, µs)
 *   KEYS[3] alive — sorted set of the same owners by the server time their entry expires
 *   KEYS[4..6] a semaphore's queue, liveness and permits (redis-semaphore.scripts.ts), passed
 *           where a script must tell a semaphore on the key from a lock
 *
 * A semaphore lives at the lock key itself, as a sorted set: `SET NX` fails on it as on a held
 * lock, and a script's `GET` of it would raise WRONGTYPE — so they read it with `redis.pcall`, and
 * the queue script (the contended path only) reports the semaphore's permits instead.
 *
 * Fairness without polling: a release does not free a contended key, it re-assigns it to the
 * head waiter for a short reservation (taking it out of the queue) and publishes that waiter's
 * id and the reservation's length in ms, "<owner> <ms>" (so the waiter trusts the reservation no
 * longer than the server keeps it, whatever its own settings); the waiter starts at once on the
 * reservation and claims the key with its own ttl in the background (EXTEND). So a newcomer's
 * plain `SET NX` cannot jump the queue, and a waiter that died only delays the queue by its
 * reservation/entry lifetime.
 *
 * Commands per critical section of a hot key (INFO commandstats counts a script's own calls):
 * joining while the key is held skips the purge of dead waiters (the release skips them when it
 * hands the key on: ZPOPMIN, then the popped waiter's liveness), and the holder's release, never
 * in the queue itself, pops the next waiter instead of ranging and removing it.
 */
/** Drop waiters whose entry expired (their process died or stopped refreshing). Sets `t` and `nowMs` (declared by the caller). */
const PURGE = `
t = redis.call('TIME')
nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', nowMs)
for i = 1, #dead do
  redis.call('ZREM', KEYS[2], dead[i])
  redis.call('ZREM', KEYS[3], dead[i])
end
`;

/**
 * Join or refresh the queue, or take the lock when it is free and it is our turn, or claim a
 * hand-off reserved for us. ARGV: owner, ttl ms, entry lifetime ms, wake channel.
 * Returns {1} when acquired, else {0, ms until the holder's expiry if we are next, or -1}, or
 * {-1, permits} when a semaphore holds or awaits the key.
 */
export const ENQUEUE = script(`
local owner, ttl, life = ARGV[1], ARGV[2], tonumber(ARGV[3])
local holder = redis.pcall('GET', KEYS[1])
-- WRONGTYPE: the key is a semaphore's set of holders. Refuse, saying its permits.
if type(holder) == 'table' then return {-1, tonumber(redis.call('GET', KEYS[6])) or 0} end
if holder == owner then
  -- A hand-off reserved for us: claim it with our own ttl (no purge needed on this path).
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZREM', KEYS[2], owner)
  redis.call('ZREM', KEYS[3], owner)
  return {1}
end
local t, nowMs
local head
if holder then
  -- Held: only join (a dead waiter ahead of us is skipped when the key is handed on).
  t = redis.call('TIME')
  nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
else
  -- Free, but a semaphore's waiters may be queued for it (its holders all gone a moment ago).
  local permits = redis.call('GET', KEYS[6])
  if permits then return {-1, tonumber(permits)} end
  ${PURGE}
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if (not head) or head == owner then
    redis.call('SET', KEYS[1], owner, 'PX', ttl)
    redis.call('ZREM', KEYS[2], owner)
    redis.call('ZREM', KEYS[3], owner)
    return {1}
  end
  redis.call('SET', KEYS[1], head, 'PX', life)
  redis.call('ZREM', KEYS[2], head)
  redis.call('ZREM', KEYS[3], head)
  redis.call('PUBLISH', ARGV[4], head .. ' ' .. ARGV[3])
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
end
if redis.call('ZADD', KEYS[2], 'NX', tonumber(t[1]) * 1000000 + tonumber(t[2]), owner) == 1 and not head then head = owner end
redis.call('ZADD', KEYS[3], nowMs + life, owner)
redis.call('PEXPIRE', KEYS[2], life)
redis.call('PEXPIRE', KEYS[3], life)
if head == owner then return {0, redis.call('PTTL', KEYS[1])} end
return {0, -1}
`);

/** RELEASE's logic as a Lua function (owner, reservation ms, wake channel), shared with FORCE_RELEASE. */
const RELEASE_FUNCTION = `
local function release(owner, reserveMs, channel)
  local holder = redis.pcall('GET', KEYS[1])
  if type(holder) == 'table' then
    -- A semaphore took the key since (this owner's lock had expired): only leave the queue.
    redis.call('ZREM', KEYS[2], owner)
    redis.call('ZREM', KEYS[3], owner)
    return 0
  end
  local nowMs
  -- The oldest waiter still alive (never the releasing owner), taken out of the queue; dead ones
  -- met on the way are dropped. nil when nobody waits.
  local function nextLive()
    while true do
      local popped = redis.call('ZPOPMIN', KEYS[2])
      if #popped == 0 then return nil end
      local head = popped[1]
      if not nowMs then
        local t = redis.call('TIME')
        nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local alive = redis.call('ZSCORE', KEYS[3], head)
      redis.call('ZREM', KEYS[3], head)
      if head ~= owner and alive and tonumber(alive) > nowMs then return head end
    end
  end
  local function handOn()
    local head = nextLive()
    if head then
      redis.call('SET', KEYS[1], head, 'PX', reserveMs)
      redis.call('PUBLISH', channel, head .. ' ' .. reserveMs)
    end
    return head
  end
  if holder == owner then
    -- The common case: the holder (never in the queue itself) gives the key to the next live
    -- waiter, or deletes it when nobody waits — uncontended: GET, ZPOPMIN, DEL.
    if not handOn() then redis.call('DEL', KEYS[1]) end
    return 1
  end
  -- A waiter giving up (or a holder whose lease ended): leave the queue; a free key goes on.
  redis.call('ZREM', KEYS[2], owner)
  redis.call('ZREM', KEYS[3], owner)
  if not holder then handOn() end
  return 0
end
`;

/**
 * Release if ARGV[1] holds the key, and leave the queue either way (a waiter giving up calls it
 * too). The next live waiter, if any, gets the key reserved and a wake-up.
 * ARGV: owner, reservation ms, wake channel. Returns 1 if the owner held the key, else 0.
 */
export const RELEASE = script(`${RELEASE_FUNCTION}
return release(ARGV[1], ARGV[2], ARGV[3])
`);

/**
 * End the hold on the key whoever holds it (an operator's forceRelease): released as its holder
 * would (the next live waiter gets it reserved), and "!lost <holder>" published on the wake
 * channel, so the holder's process — subscribed since its grant — aborts the lease at once.
 * On a semaphore, every holder's permit ends so. ARGV: reservation ms, wake channel. Returns the
 * holder (a semaphore's first), or nil when the key was free.
 */
export const FORCE_RELEASE = script(`${RELEASE_FUNCTION}
${SEMAPHORE_FORCE_RELEASE}
local holder = redis.call('GET', KEYS[1])
if not holder then return false end
release(holder, ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[2], '!lost ' .. holder)
return holder
`);

/**
 * Who holds the key, for how much longer, and how many live waiters queue for it (inspect).
 * Returns {holder, ms left, waiters}, or an empty reply when the key is free; a semaphore's
 * reply adds its permits and holders (see SEMAPHORE_INSPECT).
 */
export const INSPECT = script(`${SEMAPHORE_INSPECT}
local holder = redis.call('GET', KEYS[1])
if not holder then return {} end
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {holder, redis.call('PTTL', KEYS[1]), redis.call('ZCOUNT', KEYS[3], '(' .. nowMs, '+inf')}
`);

/** Reset the expiry if ARGV[1] still holds the key. ARGV: owner, ttl ms. Returns 1 or 0. */
export const EXTEND = script(`
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`);

/**
 * Delete the key if ARGV[1] holds it: the release of a backend that never queues (a Redlock
 * master), where RELEASE's hand-on would find no queue. ARGV: owner. Returns 1 or 0.
 */
export const DELETE_IF_OWNER = script(`
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`);

/**
 * Take every key or none, in one step: KEYS = the lock keys (one Cluster slot), ARGV = one owner
 * per key, then the ttl ms. A key that exists (held, handed off, or a semaphore's set) refuses
 * the lot and nothing is written. Returns 1 or 0.
 */
export const SET_ALL_NX = script(`
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
local ttl = ARGV[#KEYS + 1]
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i], 'PX', ttl)
end
return 1
`);
