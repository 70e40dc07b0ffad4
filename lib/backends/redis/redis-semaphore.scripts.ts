import { redisScript as script } from './redis-script.loader.js';

/**
 * Lua scripts of the Redis semaphores (`permits` ≥ 2). Every name and value travels in KEYS / ARGV.
 *
 * Keys of one semaphore, all inside the lock key's hash tag (one Cluster slot), in this order
 * (RedisBackend.allKeysOf):
 *   KEYS[1] the lock key itself — here a sorted set of holders, owner → expiry (server time, ms).
 *           A plain lock's `SET NX` fails on it, so a plain caller cannot slip in beside the holders;
 *           the set expires (PEXPIREAT) with its last holder.
 *   KEYS[2] the plain lock's queue (read only: plain waiters queued make the key "awaited as a
 *           plain lock", which a semaphore refuses; the list lapses 3 heartbeats after its last
 *           live waiter looked); KEYS[3] the plain waiters' refreshes, unused here
 *   KEYS[4] queue — sorted set of waiting owners by arrival (server time, µs)
 *   KEYS[5] alive — sorted set of the same owners by the server time their entry expires
 *   KEYS[6] permits — the number every caller of the key must agree on; kept while holders or
 *           waiters remain, so a caller arriving in a gap between holders still meets it
 *
 * No hand-off: a release (or a leaving waiter, or an expiry found on the way) wakes the first
 * waiters a free permit admits by publishing "<owner> 0" on the wake channel (0: no reservation),
 * and they ask again. A newcomer is admitted only when the holders and every waiter ahead of it
 * fit in the permits, so the queue is served in arrival order. Scripts run atomically: a permit
 * can never be given twice.
 */

/** Shared by every script below: the server clock, the purge of expired holders and dead waiters, and the expiries. */
const COMMON = `
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Holders past their expiry (their process died or paused) and waiters that stopped refreshing
-- their entry. Returns how many holders it dropped. Only on a set (a plain lock's key is a string).
local function purge()
  local gone = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs)
  local dead = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', nowMs)
  for i = 1, #dead do
    redis.call('ZREM', KEYS[4], dead[i])
    redis.call('ZREM', KEYS[5], dead[i])
  end
  return gone
end
-- Nothing stays longer than what it holds: the holders' set until its last holder's expiry, the
-- permits until then or until the queue's own expiry, whichever is later. \`plain\`: a plain lock
-- took the key (only the queue and the permits are ours).
local function tidy(plain)
  local last = (not plain) and redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2]
  local keep = 0
  if last then
    keep = tonumber(last)
    redis.call('PEXPIREAT', KEYS[1], keep)
  end
  local queued = redis.call('PTTL', KEYS[4])
  if queued > 0 then keep = math.max(keep, nowMs + queued) end
  if keep > nowMs then redis.call('PEXPIREAT', KEYS[6], keep) else redis.call('DEL', KEYS[4], KEYS[5], KEYS[6]) end
end
-- Wake the first waiters the free permits admit (they ask again; no reservation).
local function wake(channel)
  local permits = tonumber(redis.call('GET', KEYS[6]))
  if not permits then return end
  local free = permits - redis.call('ZCARD', KEYS[1])
  if free <= 0 then return end
  local next = redis.call('ZRANGE', KEYS[4], 0, free - 1)
  for i = 1, #next do redis.call('PUBLISH', channel, next[i] .. ' 0') end
end
`;

/**
 * Take a permit, or join (refresh) the queue. ARGV: owner, ttl ms, permits, entry lifetime ms,
 * queue ('1' or '0'). Returns {1} when granted; {0, ms until the soonest holder's expiry, or -1}
 * when not (the waiter looks again then: an expiry publishes nothing); {-1, permits found} when
 * the key is held or awaited with other permits (1: a plain lock).
 */
export const SEMAPHORE_ACQUIRE = script(`${COMMON}
local owner, ttl, permits, life = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'string' then return {-1, 1} end
if kind ~= 'zset' and kind ~= 'none' then return redis.error_reply('the key ' .. KEYS[1] .. ' is neither a lock nor a semaphore') end
if kind == 'none' and redis.call('EXISTS', KEYS[2]) == 1 then return {-1, 1} end
local stored = tonumber(redis.call('GET', KEYS[6]))
if stored and stored ~= permits then return {-1, stored} end
purge()
if redis.call('ZSCORE', KEYS[1], owner) then
  -- A request applied twice (a client's resend after a reconnect): the permit is ours already.
  redis.call('ZADD', KEYS[1], nowMs + ttl, owner)
  tidy()
  return {1}
end
local rank = redis.call('ZRANK', KEYS[4], owner)
local ahead = rank or redis.call('ZCARD', KEYS[4])
if redis.call('ZCARD', KEYS[1]) + ahead < permits then
  redis.call('ZADD', KEYS[1], nowMs + ttl, owner)
  redis.call('ZREM', KEYS[4], owner)
  redis.call('ZREM', KEYS[5], owner)
  redis.call('SET', KEYS[6], permits)
  tidy()
  return {1}
end
if ARGV[5] == '1' then
  if not rank then
    redis.call('ZADD', KEYS[4], tonumber(t[1]) * 1000000 + tonumber(t[2]), owner)
    rank = ahead
  end
  redis.call('ZADD', KEYS[5], nowMs + life, owner)
  redis.call('PEXPIRE', KEYS[4], life)
  redis.call('PEXPIRE', KEYS[5], life)
  redis.call('SET', KEYS[6], permits)
end
tidy()
-- The soonest expiry matters to a waiter a single freed permit may admit (and to a caller told "busy").
local soonest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
if soonest and (ARGV[5] ~= '1' or rank < permits) then return {0, tonumber(soonest) - nowMs} end
return {0, -1}
`);

/**
 * Give back ARGV[1]'s permit if it holds one, and leave the queue either way (a waiter giving up,
 * a late answer's clean-up). Wakes the waiters a freed place admits. ARGV: owner, wake channel.
 * Returns 1 if the owner held a live permit, else 0.
 */
export const SEMAPHORE_RELEASE = script(`${COMMON}
local owner = ARGV[1]
local rank = redis.call('ZRANK', KEYS[4], owner)
redis.call('ZREM', KEYS[4], owner)
redis.call('ZREM', KEYS[5], owner)
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'string' then
  tidy(true)
  return 0
end
local held = 0
local expiry = redis.call('ZSCORE', KEYS[1], owner)
if expiry then
  redis.call('ZREM', KEYS[1], owner)
  if tonumber(expiry) > nowMs then held = 1 end
end
local expired = purge()
local permits = tonumber(redis.call('GET', KEYS[6])) or 0
-- Someone may be admitted now: a permit came back, or expired, or a waiter ahead of others left.
if expiry or expired > 0 or (rank and rank < permits) then wake(ARGV[2]) end
tidy()
return held
`);

/** Reset ARGV[1]'s expiry to ARGV[2] ms from now if it holds a live permit. Returns 1 or 0. */
export const SEMAPHORE_EXTEND = script(`${COMMON}
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return 0 end
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= nowMs then return 0 end
redis.call('ZADD', KEYS[1], nowMs + tonumber(ARGV[2]), ARGV[1])
tidy()
return 1
`);

/**
 * The semaphore branch of INSPECT (a plain lock's key is a string): {'', ms the last holder has
 * left, live waiters, permits, holders}, or an empty reply when no live holder remains.
 */
export const SEMAPHORE_INSPECT = `
if redis.call('TYPE', KEYS[1]).ok == 'zset' then
  local t = redis.call('TIME')
  local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local holders = redis.call('ZCOUNT', KEYS[1], '(' .. nowMs, '+inf')
  if holders == 0 then return {} end
  local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
  local waiters = redis.call('ZCOUNT', KEYS[5], '(' .. nowMs, '+inf')
  return {'', last - nowMs, waiters, tonumber(redis.call('GET', KEYS[6])) or 0, holders}
end
`;

/**
 * The semaphore branch of FORCE_RELEASE: every holder's permit ends at once, "!lost <owner>" is
 * published for each (its process aborts the lease), the first waiters are woken. ARGV[2]: the
 * wake channel. Returns the first holder, or nil when none was live.
 */
export const SEMAPHORE_FORCE_RELEASE = `
if redis.call('TYPE', KEYS[1]).ok == 'zset' then
  ${COMMON}
  purge()
  local holders = redis.call('ZRANGE', KEYS[1], 0, -1)
  redis.call('DEL', KEYS[1])
  wake(ARGV[2])
  for i = 1, #holders do redis.call('PUBLISH', ARGV[2], '!lost ' .. holders[i]) end
  tidy()
  return holders[1] or false
end
`;

/**
 * What a plain lock's busy `SET NX` ran into (not on the hot path: only a refused try that must
 * say more). KEYS: lock, permits. Returns {-1, permits} for a semaphore, else {ms the holder has left}.
 */
export const PLAIN_BUSY = script(`
if redis.call('TYPE', KEYS[1]).ok == 'zset' then return {-1, tonumber(redis.call('GET', KEYS[2])) or 0} end
return {redis.call('PTTL', KEYS[1])}
`);
