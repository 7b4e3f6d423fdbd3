-- The lean layout's release (see acquire.lua): compare, then replace the
-- lease by its release record. KEYS[1] the lock key, ARGV[1] the lease's
-- "<token>:<nonce>"; the record lives a minute.
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], '-' .. ARGV[1], 'PX', 60000)
return 1
