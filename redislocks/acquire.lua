-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the counter TTL in ms.
-- Returns the token (> 0), or -1 - the holder's remaining TTL in ms when the
-- key is held.
--
-- The token is max(last token + 1, server TIME in microseconds). The counter
-- only guards against two mints in one microsecond and small clock steps
-- back; when it is lost (restart without persistence, eviction, FLUSHALL,
-- failover), TIME alone keeps tokens above every earlier one, so the counter
-- can carry a TTL instead of living forever. Microseconds stay exact in a Lua
-- double until 2^53, around the year 2255.
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  if pttl < 0 then pttl = 0 end
  return -1 - pttl
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('GET', KEYS[2]) or 0) or 0
if last >= token then token = last + 1 end
local s = string.format('%d', token)
redis.call('SET', KEYS[2], s, 'PX', ARGV[2])
redis.call('SET', KEYS[1], s, 'PX', ARGV[1])
return token
