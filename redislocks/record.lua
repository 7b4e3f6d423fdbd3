-- Add a run to a task's history and keep only the newest.
-- KEYS[1] the task's runs list, KEYS[2] the nonce of the task's last
-- record. ARGV[1] the run (JSON), ARGV[2] how many runs to keep, ARGV[3]
-- the keys' TTL in ms after this run, ARGV[4] the calling attempt's nonce,
-- the same across the client's retries: a retry whose first attempt
-- recorded the run finds its nonce and adds nothing.
if redis.call('GET', KEYS[2]) == ARGV[4] then
  return 0
end
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])
return 1
