-- Release a lease if it is still the current holder, and tell waiters.
-- KEYS[1] the lock key. ARGV[1] the lease's token, ARGV[2] the key's release
-- notification channel, ARGV[3] '1' if the releasing driver has waiters for
-- the key.
-- Returns 1 when released, 0 when the lease was no longer the holder (it
-- expired or was superseded: nothing is touched).
--
-- The release is published only if an Acquire failed during the lease (the
-- value carries a '+') or the releasing driver has waiters, so uncontended
-- locks cost no notification.
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[3] == '1' then
    redis.call('PUBLISH', ARGV[2], ARGV[1])
  end
  return 1
end
if v == ARGV[1] .. '+' then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
