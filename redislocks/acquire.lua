-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the counter's TTL in ms, set when the
-- counter is created.
-- Returns the token (> 0), or 0 when the key is held.
--
-- Tokens count up from the server's TIME in microseconds at the counter's
-- creation. A counter advances by one per acquisition and a clock by one per
-- microsecond, so tokens stay behind the clock by about the counter's age.
-- When the counter is lost (its TTL, a restart without persistence,
-- eviction, FLUSHALL, failover), the next one starts again from TIME, above
-- every earlier token. So the counter can expire and never leaks, and one
-- INCR mints a token.
--
-- The lock's value is the token, with '+' appended once an Acquire failed
-- during the lease: then its Release tells waiters, and otherwise it
-- publishes nothing.
local token = redis.call('INCR', KEYS[2])
if token == 1 then
  local now = redis.call('TIME')
  token = tonumber(now[1]) * 1000000 + tonumber(now[2])
  redis.call('SET', KEYS[2], string.format('%d', token), 'PX', ARGV[2])
end
if not redis.call('SET', KEYS[1], string.format('%d', token), 'NX', 'PX', ARGV[1]) then
  local v = redis.call('GET', KEYS[1])
  if v and string.sub(v, -1) ~= '+' then
    redis.call('APPEND', KEYS[1], '+')
  end
  return 0
end
return token
