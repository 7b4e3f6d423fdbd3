-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the counter TTL in ms.
-- Returns the token (> 0), or 0 when the key is held.
--
-- The token is max(last token + 1, server TIME in microseconds). The counter
-- only guards against two mints in one microsecond and small clock steps
-- back; when it is lost (restart without persistence, eviction, FLUSHALL,
-- failover), TIME alone keeps tokens above every earlier one, so the counter
-- can carry a TTL instead of living forever. Microseconds stay exact in a Lua
-- double until 2^53, around the year 2255.
--
-- The lock's value is the token, with '+' appended once an Acquire failed
-- during the lease: then its Release tells waiters, and otherwise it
-- publishes nothing.
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local s = string.format('%d', token)
if not redis.call('SET', KEYS[1], s, 'NX', 'PX', ARGV[1]) then
  local v = redis.call('GET', KEYS[1])
  if v and string.sub(v, -1) ~= '+' then
    redis.call('APPEND', KEYS[1], '+')
  end
  return 0
end
local last = tonumber(redis.call('SET', KEYS[2], s, 'PX', ARGV[2], 'GET') or '')
if last and last >= token then
  -- The counter is ahead of this server's clock: continue from it.
  token = last + 1
  s = string.format('%d', token)
  redis.call('SET', KEYS[2], s, 'PX', ARGV[2])
  redis.call('SET', KEYS[1], s, 'PX', ARGV[1])
end
return token
