-- Add a run to a task's history and keep only the newest.
-- KEYS[1] the task's runs list. ARGV[1] the run (JSON), ARGV[2] how many
-- runs to keep, ARGV[3] the list's TTL in ms after this run.
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
