-- Take a task's pending manual-run request.
-- KEYS[1] the requests hash, KEYS[2] the hash of the last take of each
-- task. ARGV[1] the task's name, ARGV[2] the calling attempt's nonce, the
-- same across the client's retries, ARGV[3] how long a take is remembered,
-- in ms.
-- Returns the request's instant (Unix nanoseconds, as text), or false when
-- none is pending. Reading and deleting in one script is what lets exactly
-- one of the racing nodes have it; the take is remembered as
-- "<nonce>:<instant>", so that a retry of the call whose first attempt took
-- the request (its reply lost) answers that request again.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ':' .. v)
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return v
end
local t = redis.call('HGET', KEYS[2], ARGV[1])
if t then
  local sep = string.find(t, ':', 1, true)
  if sep and string.sub(t, 1, sep - 1) == ARGV[2] then
    return string.sub(t, sep + 1)
  end
end
return false
