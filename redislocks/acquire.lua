-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the counter's TTL in ms, ARGV[3] the
-- calling Acquire's nonce, the same across the client's retries of it,
-- ARGV[4] the caller: '0' a plain Acquire, '1' an Acquire of locks.Wait that
-- has not waited yet, '2' one that has waited; ARGV[5], when acquireclaim.lua
-- calls this as a function, the server's TIME that it read once for all its
-- fires (a script runs alone, and each fire's key has a counter of its own).
-- Returns the token (> 0); 0 when a lease holds the key; -1 when a handoff
-- reservation holds it.
--
-- A lease's value is "<token>:<nonce>" followed by its mark: nothing, '+'
-- once a plain Acquire was refused during the lease (its Release tells
-- waiters), or '*' once an Acquire of locks.Wait was (its Release also
-- reserves the key for callers that waited). A retry of an Acquire whose
-- first attempt took the key finds its own nonce there and answers that
-- attempt's token, so the call gets the lease it took instead of being
-- refused by it.
--
-- A reservation's value is '~' followed by the strongest mark of the callers
-- it refused. Only a caller that waited ('2') takes it, and its lease keeps
-- that mark, so the callers refused meanwhile are served in turn.
--
-- The token is max(last token + 1, the server's TIME in microseconds). TIME
-- carries the order: a counter that is lost (its TTL, a restart without
-- persistence, eviction, FLUSHALL) or stale (a promoted replica that missed
-- the last mints) cannot make a token go back, as long as the minting
-- server's clock is not behind the clock that minted the last token. The
-- counter only separates mints within one microsecond and rides out small
-- clock steps back, so it can expire and never leaks. It is written with
-- TIME first and read back in the same command (SET ... GET): only when it
-- was not behind TIME is it written a second time. Microseconds stay exact in
-- a Lua number until 2^53, around the year 2255.
local held = redis.call('GET', KEYS[1])
local mark = ''
if held then
  local want = ARGV[4] == '0' and '+' or '*'
  local last = string.sub(held, -1)
  if last ~= '+' and last ~= '*' then
    last = ''
  end
  if string.sub(held, 1, 1) == '~' then
    if ARGV[4] ~= '2' then
      if last ~= '*' and last ~= want then
        redis.call('SET', KEYS[1], '~' .. want, 'KEEPTTL')
      end
      return -1
    end
    mark = last
  else
    local body = string.sub(held, 1, #held - #last)
    local sep = string.find(body, ':', 1, true)
    if sep and string.sub(body, sep + 1) == ARGV[3] then
      return tonumber(string.sub(body, 1, sep - 1))
    end
    if last == '' then
      redis.call('APPEND', KEYS[1], want)
    elseif last == '+' and want == '*' then
      redis.call('SETRANGE', KEYS[1], #held - 1, '*')
    end
    return 0
  end
end
local now = ARGV[5] or redis.call('TIME')
local token = tonumber(now[1]) * 1000000 + tonumber(now[2])
local s = string.format('%d', token)
local prev = tonumber(redis.call('SET', KEYS[2], s, 'PX', ARGV[2], 'GET'))
if prev and prev >= token then
  token = prev + 1
  s = string.format('%d', token)
  redis.call('SET', KEYS[2], s, 'PX', ARGV[2])
end
redis.call('SET', KEYS[1], s .. ':' .. ARGV[3] .. mark, 'PX', ARGV[1])
return token
