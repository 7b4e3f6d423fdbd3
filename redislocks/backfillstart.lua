-- Start a task's backfill, unless one is running, and note the instants
-- known to have run.
-- KEYS[1] the backfills hash, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries), KEYS[3] the task's
-- set of instants known to have run. ARGV[1] the task's name, ARGV[2] how
-- long the call is remembered, in ms, ARGV[3] the backfill's ID, ARGV[4] its
-- value in the hash, ARGV[5] the set's TTL in ms, ARGV[6] and on the
-- instants that ran (Unix nanoseconds, zero-padded to 20 digits).
-- Returns "" if it started the backfill or it was running already with
-- this ID, and the running backfill's value if another is running. A
-- retry of a call whose first attempt ran answers what that attempt did.
local done = redis.call('GET', KEYS[2])
if done then
  return done
end
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, 44, 44) == 'r' then
  local answer = v
  if cjson.decode(string.sub(v, 46)).id == ARGV[3] then
    answer = ''
  end
  redis.call('SET', KEYS[2], answer, 'PX', ARGV[2])
  return answer
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
for i = 6, #ARGV do
  redis.call('SADD', KEYS[3], ARGV[i])
end
if #ARGV >= 6 then
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
redis.call('SET', KEYS[2], '', 'PX', ARGV[2])
return ''
