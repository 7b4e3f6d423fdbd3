-- Acquire a lease and mint its fencing token in one step.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease TTL in ms, ARGV[2] the calling Acquire's nonce, the
-- same across the client's retries of it, ARGV[3] the caller: '0' a plain
-- Acquire, '1' an Acquire of locks.Wait that has not waited yet, '2' one
-- that has waited; ARGV[4], when acquireclaim.lua calls this as a function,
-- the server's TIME that it read once for all its fires (a script runs
-- alone, and each fire's key has a counter of its own).
-- Returns the token (> 0, as a decimal string); 0 when a lease holds the
-- key; -1 when a handoff reservation holds it.
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
-- clock steps back, so it can expire and never leaks: the mint that finds
-- no counter starts one that lives max(lease TTL, 24h); later mints keep
-- that TTL (SET ... KEEPTTL GET writes TIME and reads the last token back in
-- one command; only when that was not behind TIME is it written a second
-- time). The token is TIME's two fields joined as text, compared as numbers;
-- microseconds stay exact in a Lua number until 2^53, around the year 2255.
local held = redis.call('GET', KEYS[1])
local mark = ''
if held then
  local want = ARGV[3] == '0' and '+' or '*'
  local last = string.sub(held, -1)
  if last ~= '+' and last ~= '*' then
    last = ''
  end
  if string.sub(held, 1, 1) == '~' then
    if ARGV[3] ~= '2' then
      if last ~= '*' and last ~= want then
        redis.call('SET', KEYS[1], '~' .. want, 'KEEPTTL')
      end
      return -1
    end
    mark = last
  else
    local body = string.sub(held, 1, #held - #last)
    local sep = string.find(body, ':', 1, true)
    if sep and string.sub(body, sep + 1) == ARGV[2] then
      return string.sub(body, 1, sep - 1)
    end
    if last == '' then
      redis.call('APPEND', KEYS[1], want)
    elseif last == '+' and want == '*' then
      redis.call('SETRANGE', KEYS[1], #held - 1, '*')
    end
    return 0
  end
end
local now = ARGV[4] or redis.call('TIME')
local us = now[2]
if #us < 6 then
  us = string.rep('0', 6 - #us) .. us
end
local token = now[1] .. us
local prev = redis.call('SET', KEYS[2], token, 'KEEPTTL', 'GET')
if not prev then
  redis.call('PEXPIRE', KEYS[2], math.max(tonumber(ARGV[1]), 86400000))
else
  prev = tonumber(prev)
  if prev and prev >= tonumber(token) then
    token = string.format('%d', prev + 1)
    redis.call('SET', KEYS[2], token, 'KEEPTTL')
  end
end
redis.call('SET', KEYS[1], token .. ':' .. ARGV[2] .. mark, 'PX', ARGV[1])
return token
