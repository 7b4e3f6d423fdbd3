-- Take or refuse the next instant of a task's running backfill, and add
-- the taker's placeholder run, in one step.
-- KEYS[1] the backfills hash, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries), KEYS[3] the task's
-- set of instants known to have run, KEYS[4] the task's runs list.
-- ARGV[1] the task's name, ARGV[2] how long the call is remembered, in ms,
-- ARGV[3] the backfill's ID, ARGV[4] the instant (Unix nanoseconds,
-- zero-padded to 20 digits, as the value's cursor), ARGV[5] the
-- placeholder run's JSON, ARGV[6] the store's history length (the runs
-- are trimmed to it, or to as many as the task had if more), ARGV[7] the
-- runs list's and the set's TTL in ms, ARGV[8] how the JSON of a run of the
-- instant that is not manual begins ('{"fire":"<instant>","node":').
-- A value of the hash is "<cursor> <taken> <refused> <state> <JSON>": the
-- cursor zero-padded to 20 digits, the counts to 10, the state one letter
-- (r running, d done, c cancelled), then the backfill's fixed fields.
-- Returns 1 if it took the instant, 2 if it refused it (it ran: a backfill
-- took it, it was known to have run at the start, or a kept run of it
-- started or was taken; and the backfill does not force it), 0 if it changed nothing (no such backfill
-- running, or its cursor is at or past the instant). A retry of a call
-- whose first attempt ran answers what that attempt did.
local done = redis.call('GET', KEYS[2])
if done then
  return tonumber(done)
end
local function answer(n)
  redis.call('SET', KEYS[2], n, 'PX', ARGV[2])
  return n
end
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v or string.sub(v, 44, 44) ~= 'r' or ARGV[4] <= string.sub(v, 1, 20) then
  return answer(0)
end
local fixed = string.sub(v, 46)
local b = cjson.decode(fixed)
if b.id ~= ARGV[3] then
  return answer(0)
end
local taken, refused = tonumber(string.sub(v, 22, 31)), tonumber(string.sub(v, 33, 42))
-- A kept run of the instant: a run's JSON escapes every quote within its
-- strings, so the fields' own text is found only where they are.
local function keptRun()
  for _, run in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
    if string.sub(run, 1, #ARGV[8]) == ARGV[8] and
        (not string.find(run, '"start":"0001-01-01T00:00:00Z"', 1, true) or string.find(run, '"outcome":"taken"', 1, true)) then
      return true
    end
  end
  return false
end
local n = 1
if not b.force and (redis.call('SISMEMBER', KEYS[3], ARGV[4]) == 1 or keptRun()) then
  n, refused = 2, refused + 1
else
  taken = taken + 1
  redis.call('SADD', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
  redis.call('LPUSH', KEYS[4], ARGV[5])
  -- A placeholder never shortens the history (TaskRun.Keep may have made it
  -- longer than the store's history length).
  redis.call('LTRIM', KEYS[4], 0, math.max(tonumber(ARGV[6]), redis.call('LLEN', KEYS[4]) - 1) - 1)
  redis.call('PEXPIRE', KEYS[4], ARGV[7])
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%s %010d %010d r %s', ARGV[4], taken, refused, fixed))
return answer(n)
