-- Extend a lease if it is still the current holder.
-- KEYS[1] the lock key, KEYS[2] the token counter key (same hash slot).
-- ARGV[1] the lease's token, ARGV[2] the new lease TTL in ms, ARGV[3] the
-- counter TTL in ms (never shorter than the lease's).
-- Returns 1 when extended, 0 when the lease was no longer the holder.
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '+' then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
