-- Set or clear a task's paused flag.
-- KEYS[1] the task's paused flag, KEYS[2] the call's key (named after the
-- call's nonce, the same across the client's retries). ARGV[1] "1" to
-- pause, "0" to resume, ARGV[2] how long the call is remembered, in ms.
-- A retry whose first attempt ran finds the call's key and changes
-- nothing, so that it does not undo another node's SetPaused made in
-- between: the call takes effect once, as if at its first attempt.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
if ARGV[1] == '1' then
  redis.call('SET', KEYS[1], '1')
else
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 1
