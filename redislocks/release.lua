-- Release a lease if it is still the current holder, and tell waiters.
-- KEYS[1] the lock key. ARGV[1] the lease's token, ARGV[2] the key's release
-- notification channel.
-- Returns 1 when released, 0 when the lease was no longer the holder (it
-- expired or was superseded: nothing is touched).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
