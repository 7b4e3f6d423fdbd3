-- Add a run to a task's history, in place of its placeholder for a manual
-- run or a retry, keep only the newest, and leave the run's retry pending.
-- KEYS[1] the task's runs list, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries), KEYS[3] the retries
-- hash. ARGV[1] the run (JSON), ARGV[2] how many runs to keep, ARGV[3] the
-- list's TTL in ms after this run, ARGV[4] the placeholder the run replaces
-- (the JSON take.lua or takeretry.lua wrote) or "" for none, ARGV[5] how
-- long the call is remembered, in ms, ARGV[6] the task's name, ARGV[7] the
-- retry the run leaves pending (the retries hash's value) or "" for none,
-- whose first ARGV[8] bytes (its fire and attempt, zero-padded) order it:
-- it replaces the task's last retry, pending or taken, only if later, so
-- that a record sent again after its retry was taken leaves nothing.
-- ARGV[9] is how the run's JSON ends when it has an ID (',"id":"<ID>"}')
-- or "" for none: a run whose ID a kept run has is not added again.
-- A retry whose first attempt recorded the run finds the call's key and
-- adds nothing, whatever other nodes recorded in between; a caller's
-- resend after the key expired finds the kept run, and adds no run.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local kept = false
if ARGV[9] ~= '' then
  local n = #ARGV[9]
  for _, v in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if string.sub(v, -n) == ARGV[9] then
      kept = true
      break
    end
  end
end
if not kept then
  if ARGV[4] ~= '' then
    redis.call('LREM', KEYS[1], 1, ARGV[4])
  end
  redis.call('LPUSH', KEYS[1], ARGV[1])
  redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
if ARGV[7] ~= '' then
  local last = redis.call('HGET', KEYS[3], ARGV[6])
  local n = tonumber(ARGV[8])
  if not last or string.sub(ARGV[7], 1, n) > string.sub(last, 1, n) then
    redis.call('HSET', KEYS[3], ARGV[6], ARGV[7])
  end
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[5])
return 1
