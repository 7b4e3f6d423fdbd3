-- End a task's running backfill.
-- KEYS[1] the backfills hash, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries). ARGV[1] the task's
-- name, ARGV[2] how long the call is remembered, in ms, ARGV[3] the
-- backfill's ID, ARGV[4] the state's letter (d done, c cancelled).
-- Returns 1 if it ended it, 0 if that backfill is not running. A retry of
-- a call whose first attempt ran answers what that attempt did.
local done = redis.call('GET', KEYS[2])
if done then
  return tonumber(done)
end
local n = 0
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 44, 44) == 'r' and cjson.decode(string.sub(v, 46)).id == ARGV[3] then
  redis.call('HSET', KEYS[1], ARGV[1], string.sub(v, 1, 43) .. ARGV[4] .. string.sub(v, 45))
  n = 1
end
redis.call('SET', KEYS[2], n, 'PX', ARGV[2])
return n
