-- Release a lease if it is still the current holder, and tell waiters.
-- KEYS[1] the lock key, KEYS[2] the key's tombstone (same hash slot).
-- ARGV[1] the lease's identity "<token>:<nonce>" (the lock's value without
-- the '+' mark), ARGV[2] the key's release notification channel, ARGV[3] '1'
-- if the releasing driver has waiters for the key, ARGV[4] the tombstone's
-- TTL in ms.
-- Returns 1 when released (now, or earlier by this lease's holder), 0 when
-- the lease was no longer the holder (it expired or was superseded: nothing
-- is touched).
--
-- The tombstone remembers the identities of the last few leases of the key
-- that their holders released, newest first, separated by spaces. A retry
-- of a Release whose first attempt deleted the key finds its lease there and
-- answers 1 again, even if a successor took the key in between. An entry is
-- never wrong (that lease was released by its holder); the count and the TTL
-- only bound how long a retry is recognised.
--
-- The release is published, with the token as the message, only if an
-- Acquire failed during the lease (the value carries a '+') or the releasing
-- driver has waiters, so uncontended locks cost no notification.
local keep = 8
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] and v ~= ARGV[1] .. '+' then
  local tomb = redis.call('GET', KEYS[2])
  if tomb and string.find(' ' .. tomb .. ' ', ' ' .. ARGV[1] .. ' ', 1, true) then
    return 1
  end
  return 0
end
redis.call('DEL', KEYS[1])
local tomb = ARGV[1]
local n = 1
for id in string.gmatch(redis.call('GET', KEYS[2]) or '', '%S+') do
  if n == keep then
    break
  end
  tomb = tomb .. ' ' .. id
  n = n + 1
end
redis.call('SET', KEYS[2], tomb, 'PX', ARGV[4])
if v ~= ARGV[1] or ARGV[3] == '1' then
  redis.call('PUBLISH', ARGV[2], string.match(ARGV[1], '^[^:]*'))
end
return 1
