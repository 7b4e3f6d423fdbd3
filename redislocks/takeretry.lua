-- Take a task's pending retry, if it is the one the caller read, and add
-- its taker's placeholder run to the task's history, in one step.
-- KEYS[1] the retries hash, KEYS[2] the call's key (named after the call's
-- nonce, the same across the client's retries), KEYS[3] the task's runs
-- list. ARGV[1] the task's name, ARGV[2] how long the call is remembered,
-- in ms, ARGV[3] the start of the retry's value that names it (its fire
-- and attempt), ARGV[4] the placeholder run's JSON, ARGV[5] the store's
-- history length (the runs are trimmed to it, or to as many as the task
-- had if more), ARGV[6] the runs list's TTL in ms.
-- Returns 1 if it took the retry, 0 if that retry is not pending (taken,
-- or replaced by a later one). A taken retry stays in the hash, marked
-- " t", so that a record sent again does not make it pending again (see
-- record.lua). The call's key is read first: a retry of a call whose first
-- attempt ran (its reply lost) answers what that attempt did.
local done = redis.call('GET', KEYS[2])
if done then
  return tonumber(done)
end
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v or string.sub(v, 1, #ARGV[3]) ~= ARGV[3] or string.sub(v, -2) == ' t' then
  redis.call('SET', KEYS[2], '0', 'PX', ARGV[2])
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], v .. ' t')
redis.call('LPUSH', KEYS[3], ARGV[4])
-- A placeholder never shortens the history (TaskRun.Keep may have made it
-- longer than the store's history length).
redis.call('LTRIM', KEYS[3], 0, math.max(tonumber(ARGV[5]), redis.call('LLEN', KEYS[3]) - 1) - 1)
redis.call('PEXPIRE', KEYS[3], ARGV[6])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 1
