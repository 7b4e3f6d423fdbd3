-- Take a task's pending manual-run request.
-- KEYS[1] the requests hash. ARGV[1] the task's name.
-- Returns the request's instant (Unix nanoseconds, as text), or false when
-- none is pending. Reading and deleting in one script is what lets exactly
-- one of the racing nodes have it.
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return v
