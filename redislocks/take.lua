-- Take a task's pending manual-run request and add its taker's placeholder
-- run to the task's history, in one step.
-- KEYS[1] the requests hash, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries), KEYS[3] the task's
-- runs list. ARGV[1] the task's name, ARGV[2] how long the call is
-- remembered, in ms, ARGV[3] and ARGV[4] the placeholder run's JSON before
-- and after the request's instant, ARGV[5] the store's history length
-- (the runs are trimmed to it, or to as many as the task had if more),
-- ARGV[6] the runs list's TTL in ms.
-- Returns the request's instant (Unix nanoseconds, as text), or false when
-- none is pending. Reading and deleting in one script is what lets exactly
-- one of the racing nodes have it. The call's key is read first: a retry of
-- a call whose first attempt ran (its reply lost) answers what that attempt
-- took, or that it took nothing, and never takes a request made since.
local done = redis.call('GET', KEYS[2])
if done then
  if done == '' then
    return false
  end
  return done
end
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then
  redis.call('SET', KEYS[2], '', 'PX', ARGV[2])
  return false
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('LPUSH', KEYS[3], ARGV[3] .. v .. ARGV[4])
-- A placeholder never shortens the history (TaskRun.Keep may have made it
-- longer than the store's history length).
redis.call('LTRIM', KEYS[3], 0, math.max(tonumber(ARGV[5]), redis.call('LLEN', KEYS[3]) - 1) - 1)
redis.call('PEXPIRE', KEYS[3], ARGV[6])
redis.call('SET', KEYS[2], v, 'PX', ARGV[2])
return v
