import { redisScript as script } from './redis-script.loader.js';
import { SEMAPHORE_FORCE_RELEASE, SEMAPHORE_INSPECT } from './redis-semaphore.scripts.js';

/**
 * Lua scripts of the Redis backend. Every name and value travels in KEYS / ARGV; nothing is
 * ever spliced into the script text, and no script touches a key it was not given.
 *
 * Keys of one lock (they share a hash tag, so they live in one Cluster slot), layout 2:
 *   KEYS[1] lock  — the holder's owner id, with the lease ttl as its expiry. Its name is the same
 *           in every layout, so instances of two layouts can never both hold a key.
 *   KEYS[2] queue — `:q2`, a list of waiters in arrival order, each entry "<expiry ms> <ttl ms>
 *           <owner>": the server time the entry lapses unless refreshed, and the ttl the owner
 *           asked for (set for it at hand-off). Entries never change in place.
 *   KEYS[3] refreshed — `:q2a`, a hash owner → the later expiry a waiter's heartbeat set (one
 *           O(1) write per heartbeat, whatever the queue's length); a waiter is alive while its
 *           entry's own expiry or this one is ahead
 *   KEYS[4..6] a semaphore's queue, liveness and permits (redis-semaphore.scripts.ts), passed
 *           where a script must tell a semaphore on the key from a lock
 *   KEYS[7] (ENQUEUE, REQUEUE) the queue of layout 1 (`:q`, a sorted set): only read — a waiter of
 *           an instance of that layout is queued there, and a waiter of this one refuses to
 *           queue beside it
 *
 * A semaphore lives at the lock key itself, as a sorted set: `SET NX` fails on it as on a held
 * lock, and a script's `GET` of it would raise WRONGTYPE — so they read it with `redis.pcall`, and
 * the queue scripts report the semaphore's permits instead.
 *
 * Fairness without polling: a release does not free a contended key, it gives it to the head live
 * waiter (taking it out of the queue) — for that waiter's own ttl when it is no longer than a
 * reservation of one entry lifetime (3 heartbeats), else for the reservation — and publishes
 * "<owner> <ms>" on the wake channel. The waiter starts at once: its validity counts from its first
 * queue request, which the hand-off followed. A reservation is claimed (the waiter's own ttl set,
 * owner-checked) by a request written before the waiter's work starts: a waiter that died just
 * before its hand-off blocks the key for at most the reservation. A newcomer's plain `SET NX`
 * cannot jump the queue; a dead waiter is skipped once its entry has lapsed.
 *
 * Commands per critical section of a hot key (INFO commandstats counts a script's own calls):
 * joining behind others is EVALSHA, TIME, RPUSH, PEXPIRE; the release that hands on is EVALSHA,
 * GET, LPOP, TIME, SET, PUBLISH — 10 in all for a lease within the reservation; a longer one adds
 * its claim (EVALSHA, GET, PEXPIRE).
 */

/** `now()`: the server's clock in ms, read once per script and only when needed. */
const NOW = `
local nowMs
local function now()
  if not nowMs then
    local t = redis.call('TIME')
    nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return nowMs
end
local function entryOf(owner, ttl, life)
  return string.format('%.0f %s %s', now() + life, ttl, owner)
end
`;

/**
 * A queue entry's parts: its expiry (server ms), the ttl its owner asked for, the owner. Shared by
 * the scripts that pop the head: `nextLive(skip)` takes the head live waiter out of the queue
 * (dead ones are dropped on the way, with their refresh record), `handTo` gives it the key — for
 * its own ttl, or the reservation when that is shorter — and wakes it. Needs NOW.
 */
const SERVE = `
local function parse(entry)
  local expiry, ttl, who = string.match(entry, '^(%d+) (%d+) (.*)$')
  return tonumber(expiry), ttl, who
end
local function nextLive(skip)
  while true do
    local entry = redis.call('LPOP', KEYS[2])
    if not entry then return nil end
    local expiry, ttl, who = parse(entry)
    if who and who ~= skip then
      if expiry and expiry > now() then return who, ttl end
      -- Its entry lapsed: alive if its heartbeat refreshed it since.
      local refreshed = tonumber(redis.call('HGET', KEYS[3], who))
      if refreshed and refreshed > now() then return who, ttl end
      if refreshed then redis.call('HDEL', KEYS[3], who) end
    end
  end
end
local function handTo(who, ttl, reserve, channel)
  local ms = math.min(tonumber(ttl), reserve)
  redis.call('SET', KEYS[1], who, 'PX', ms)
  redis.call('PUBLISH', channel, who .. ' ' .. ms)
end
local function ownerOf(entry)
  local _, _, who = parse(entry)
  return who
end
`;

/**
 * Join the queue, or take the lock when it is free and nobody waits. ARGV: owner, ttl ms, entry
 * lifetime ms. Returns {1} when acquired, {0, ms until the holder's expiry if first in line else
 * -1, the entry}, {-1, permits} when a semaphore holds the key, {-2, 1} when a waiter of layout 1
 * is queued for it (checked by the first in line here, and by every waiter when it looks again).
 */
export const ENQUEUE = script(`
local owner, ttl, life = ARGV[1], ARGV[2], tonumber(ARGV[3])
${NOW}
local entry = entryOf(owner, ttl, life)
local queued = redis.call('RPUSH', KEYS[2], entry)
redis.call('PEXPIRE', KEYS[2], life)
-- Behind others: they were first to see the key busy, and a release hands it on to them.
if queued > 1 then return {0, -1, entry} end
-- First in line. Free and nobody waits: take it.
if redis.call('SET', KEYS[1], owner, 'NX', 'PX', ttl) then
  redis.call('LPOP', KEYS[2])
  return {1}
end
local holder = redis.pcall('GET', KEYS[1])
-- WRONGTYPE: the key is a semaphore's set of holders. Refuse, saying its permits.
if type(holder) == 'table' then
  redis.call('LPOP', KEYS[2])
  return {-1, tonumber(redis.call('GET', KEYS[6])) or 0}
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  redis.call('LPOP', KEYS[2])
  return {-2, 1}
end
return {0, redis.call('PTTL', KEYS[1]), entry}
`);

/**
 * A queued owner looks again (its heartbeat, or the holder's expiry when first in line): its
 * liveness is refreshed (one hash field), or — when its entry may be gone — its entry is looked
 * for and added again at the end if gone. ARGV: owner, ttl ms, entry lifetime ms, wake channel,
 * its entry as last returned, '1' to look for it (its first refresh, or so long since its last
 * answer that the entry may have lapsed and been dropped), '1' if it has a refresh record.
 * Returns as ENQUEUE does (the entry: the same one while it stands); {1} also when the key was
 * handed to it and the wake-up was missed (its ttl is then set afresh).
 */
export const REQUEUE = script(`
local owner, ttl, life, channel, old = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local function leave()
  redis.call('LREM', KEYS[2], 0, old)
  redis.call('HDEL', KEYS[3], owner)
end
local holder = redis.pcall('GET', KEYS[1])
if holder == owner then
  redis.call('PEXPIRE', KEYS[1], ttl)
  leave()
  return {1}
end
if type(holder) == 'table' then
  leave()
  return {-1, tonumber(redis.call('GET', KEYS[6])) or 0}
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  leave()
  return {-2, 1}
end
${NOW}
${SERVE}
-- Its entry is looked for (a scan of the queue) only when it may be gone: asked (a waiter's first
-- refresh, or a late one), the key free (a holder's lease ran out, or Redis lost its keys), or its
-- refresh record gone though it had one (Redis lost its keys). Else one O(1) write.
local verify = ARGV[6] == '1' or not holder
if not verify and redis.call('HSET', KEYS[3], owner, now() + life) == 1 and ARGV[7] == '1' then verify = true end
local entry = old
if verify then
  if redis.call('LPOS', KEYS[2], old) then
    redis.call('HSET', KEYS[3], owner, now() + life)
  else
    entry = entryOf(owner, ttl, life)
    redis.call('RPUSH', KEYS[2], entry)
    redis.call('HDEL', KEYS[3], owner)
  end
end
-- Never shorter than what another process's longer heartbeat set.
if redis.call('PTTL', KEYS[3]) < life then redis.call('PEXPIRE', KEYS[3], life) end
if redis.call('PTTL', KEYS[2]) < life then redis.call('PEXPIRE', KEYS[2], life) end
if not holder then
  -- Free with waiters queued (a holder's lease ran out, or the last release found only dead
  -- waiters ahead): serve the head live waiter — this owner, or the one it hands on to.
  local who, whoTtl = nextLive(nil)
  if who == owner then
    redis.call('SET', KEYS[1], owner, 'PX', ttl)
    redis.call('HDEL', KEYS[3], owner)
    return {1}
  end
  if who then handTo(who, whoTtl, life, channel) end
end
local head = redis.call('LINDEX', KEYS[2], 0)
if head and ownerOf(head) == owner then return {0, redis.call('PTTL', KEYS[1]), entry} end
return {0, -1, entry}
`);

/**
 * RELEASE's logic as a Lua function (owner, its queue entry or '', reservation ms, wake channel,
 * whether the owner's heartbeat ever refreshed it), shared with FORCE_RELEASE.
 */
const RELEASE_FUNCTION = `
${NOW}
${SERVE}
local function release(owner, entry, reserve, channel, refreshed)
  local holder = redis.pcall('GET', KEYS[1])
  if holder ~= owner then
    -- A waiter leaving (or a holder whose lease ended): its entry goes — found by its owner when
    -- the entry named is not there (a queue request whose answer never came may have changed it).
    local removed = 0
    if entry ~= '' then removed = redis.call('LREM', KEYS[2], 0, entry) end
    if removed == 0 then
      for _, e in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
        if ownerOf(e) == owner then redis.call('LREM', KEYS[2], 0, e) end
      end
    end
    redis.call('HDEL', KEYS[3], owner)
  elseif refreshed then
    redis.call('HDEL', KEYS[3], owner)
  end
  -- A semaphore took the key since (this owner's lock had expired): only the queue was ours.
  if type(holder) == 'table' then return 0 end
  if holder and holder ~= owner then return 0 end
  -- Ours, or free (a waiter giving up, or a holder whose lease ended): the next live waiter
  -- gets it; nobody live waits — deleted (uncontended: GET, LPOP, DEL).
  local who, ttl = nextLive(owner)
  if who then
    handTo(who, ttl, reserve, channel)
    return holder == owner and 1 or 0
  end
  if holder == owner then
    redis.call('DEL', KEYS[1])
    return 1
  end
  return 0
end
`;

/**
 * Release if ARGV[1] holds the key, and leave the queue either way (a waiter giving up calls it
 * too, with its entry). The next live waiter, if any, gets the key and a wake-up.
 * ARGV: owner, its queue entry or '', reservation ms, wake channel, '1' if its heartbeat ever
 * refreshed it (its record goes). Returns 1 if the owner held the key, else 0.
 */
export const RELEASE = script(`${RELEASE_FUNCTION}
return release(ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5] == '1')
`);

/**
 * End the hold on the key whoever holds it (an operator's forceRelease): released as its holder
 * would (the next live waiter gets it), and "!lost <holder>" published on the wake channel, so
 * the holder's process — subscribed since its grant — aborts the lease at once. On a semaphore,
 * every holder's permit ends so. ARGV: reservation ms, wake channel. Returns the
 * holder (a semaphore's first), or nil when the key was free.
 */
export const FORCE_RELEASE = script(`${RELEASE_FUNCTION}
${SEMAPHORE_FORCE_RELEASE}
local holder = redis.call('GET', KEYS[1])
if not holder then return false end
release(holder, '', tonumber(ARGV[1]), ARGV[2], true)
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
${NOW}
local live = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local expiry, _, who = string.match(entry, '^(%d+) (%d+) (.*)$')
  if tonumber(expiry) > now() or (tonumber(redis.call('HGET', KEYS[3], who)) or 0) > now() then live = live + 1 end
end
return {holder, redis.call('PTTL', KEYS[1]), live}
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
