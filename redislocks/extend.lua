-- Extend a lease if it is still the current holder.
-- KEYS[1] the lock key. ARGV[1] the lease's token, ARGV[2] the new lease TTL
-- in ms.
-- Returns 1 when extended, 0 when the lease was no longer the holder.
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '+' then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
