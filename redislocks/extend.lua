-- Extend a lease if it is still the current holder.
-- KEYS[1] the lock key. ARGV[1] the lease's identity "<token>:<nonce>" (the
-- lock's value without its mark, '+' or '*'), ARGV[2] the new lease TTL in
-- ms.
-- Returns 1 when extended, 0 when the lease was no longer the holder.
--
-- A retry of an Extend whose first attempt ran finds the lease still held
-- (only its holder's Release or the TTL it just set could end it) and sets
-- the TTL again from a later instant; the holder's local deadline was
-- measured from before the first attempt, so it stays ahead of Redis.
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '+' and v ~= ARGV[1] .. '*' then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
