-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the counter's TTL in ms.
-- Returns the token (> 0), or 0 when the key is held.
--
-- The token is max(last token + 1, the server's TIME in microseconds). TIME
-- carries the order: a counter that is lost (its TTL, a restart without
-- persistence, eviction, FLUSHALL) or stale (a promoted replica that missed
-- the last mints) cannot make a token go back, as long as the minting
-- server's clock is not behind the clock that minted the last token. The
-- counter only separates mints within one microsecond and rides out small
-- clock steps back, so it can expire and never leaks. Microseconds stay exact
-- in a Lua number until 2^53, around the year 2255.
--
-- The lock's value is the token, with '+' appended once an Acquire failed
-- during the lease: then its Release tells waiters, and otherwise it
-- publishes nothing.
local held = redis.call('GET', KEYS[1])
if held then
  if string.sub(held, -1) ~= '+' then
    redis.call('APPEND', KEYS[1], '+')
  end
  return 0
end
local now = redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local last = tonumber(redis.call('GET', KEYS[2]))
if last and last >= token then
  token = last + 1
end
local s = string.format('%d', token)
redis.call('SET', KEYS[2], s, 'PX', ARGV[2])
redis.call('SET', KEYS[1], s, 'PX', ARGV[1])
return token
