import { redisScript as script } from '../backends/redis/redis-script.loader.js';

/**
 * Tokens travel as canonical decimal strings (BigInt#toString) and are compared as strings —
 * first by length, then lexically — so they stay exact beyond 2^53, where Lua numbers
 * (doubles) would round two different tokens to the same value.
 *
 * The resource key is a hash: `v` the value, `f` the fence (highest token seen on any fenced
 * read or write). Lower token: refused, nothing changes. Equal: the same holder. Higher: raises it.
 */
const OLDER = `
local function older(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local fence = redis.call('HGET', KEYS[1], 'f')
if fence and older(ARGV[1], fence) then return {0, fence} end
`;

/**
 * ARGV: token, value, write id. Returns {1} when written, {0, fence} when the token is stale. The
 * hash keeps the ids of its last 16 writes (\`w\`): a copy of a write resent after its answer was
 * lost (ioredis resends on reconnect) finds its id there when an earlier copy was applied, and
 * says so, even if the fence rose in between.
 */
export const FENCED_WRITE = script(`
local ids = redis.call('HGET', KEYS[1], 'w') or ''
if string.find(' ' .. ids .. ' ', ' ' .. ARGV[3] .. ' ', 1, true) then return {1} end
${OLDER}
local kept = {}
for id in string.gmatch(ids, '%S+') do kept[#kept + 1] = id end
while #kept >= 16 do table.remove(kept, 1) end
kept[#kept + 1] = ARGV[3]
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'f', ARGV[1], 'w', table.concat(kept, ' '))
return {1}
`);

/** ARGV: token. Raises the fence to the token and returns {1, value}; {0, fence} when stale. */
export const FENCED_READ = script(`${OLDER}
if fence ~= ARGV[1] then redis.call('HSET', KEYS[1], 'f', ARGV[1]) end
return {1, redis.call('HGET', KEYS[1], 'v')}
`);
