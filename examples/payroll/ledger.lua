-- Fenced append: accept an entry only if its fencing token is at least the
-- highest token the ledger has accepted, so a stale lock holder (paused past
-- its lease while a successor wrote) cannot write behind the successor.
-- KEYS[1]: the ledger list; KEYS[2]: the highest accepted token.
-- ARGV[1]: the writer's token; ARGV[2]: the entry.
-- Tokens stay below 2^53, so Lua numbers compare them exactly.
local high = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < high then
  return {0, tostring(high)}
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[2])
return {1, ARGV[1]}
