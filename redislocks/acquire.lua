-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the counter's TTL in ms, ARGV[3] the
-- calling Acquire's nonce, the same across the client's retries of it.
-- Returns the token (> 0), or 0 when the key is held.
--
-- The lock's value is "<token>:<nonce>", with '+' appended once an Acquire
-- failed during the lease: then its Release tells waiters, and otherwise it
-- publishes nothing. A retry of an Acquire whose first attempt took the key
-- finds its own nonce there and answers that attempt's token, so the call
-- gets the lease it took instead of being refused by it.
--
-- The token is max(last token + 1, the server's TIME in microseconds). TIME
-- carries the order: a counter that is lost (its TTL, a restart without
-- persistence, eviction, FLUSHALL) or stale (a promoted replica that missed
-- the last mints) cannot make a token go back, as long as the minting
-- server's clock is not behind the clock that minted the last token. The
-- counter only separates mints within one microsecond and rides out small
-- clock steps back, so it can expire and never leaks. Microseconds stay exact
-- in a Lua number until 2^53, around the year 2255.
local held = redis.call('GET', KEYS[1])
if held then
  local body = held
  local marked = string.sub(held, -1) == '+'
  if marked then
    body = string.sub(held, 1, -2)
  end
  local sep = string.find(body, ':', 1, true)
  if sep and string.sub(body, sep + 1) == ARGV[3] then
    return tonumber(string.sub(body, 1, sep - 1))
  end
  if not marked then
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
redis.call('SET', KEYS[1], s .. ':' .. ARGV[3], 'PX', ARGV[1])
return token
