-- Record a pending manual-run request, merged into one already pending.
-- KEYS[1] the requests hash, KEYS[2] the call's key (named after the call's
-- nonce, the same across the client's retries). ARGV[1] the task's name,
-- ARGV[2] the request's instant (Unix nanoseconds), ARGV[3] how long the
-- call is remembered, in ms.
-- A retry whose first attempt ran finds the call's key and requests
-- nothing: had another node taken and run the first request in between, a
-- second one would run the task twice for one call.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return 1
